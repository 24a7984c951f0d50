"""Bulk loaders: stream a KG file into the graph store (see loaders/README.md).

from loaders.api import load_path
report = load_path("kb.txt", "metaqa")          # store/embedder from Settings
"""

from loaders.base import LoadError, LoadOptions, LoadProgress, LoadReport

FORMATS = ("rog", "metaqa", "triples", "ntriples", "explagraphs")  # the input formats `load` reads

__all__ = ["FORMATS", "LoadError", "LoadOptions", "LoadProgress", "LoadReport"]
