"""Bulk loaders: stream a KG file into the graph store (see loaders/README.md).

from talent_core.loaders.api import load_path
report = load_path("kb.txt", "metaqa")          # store/embedder from Settings
"""

from talent_core.errors import LoadError
from talent_core.loaders.base import LoadOptions, LoadProgress, LoadReport

FORMATS = ("rog", "metaqa", "triples", "ntriples", "explagraphs")  # the input formats `load` reads

__all__ = ["FORMATS", "LoadError", "LoadOptions", "LoadProgress", "LoadReport"]
