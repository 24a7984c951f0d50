"""Run a module's CLI with the TEST-ONLY hash embedder selectable:
``python tests/hash_cli.py talent_core load FILE ...`` (see hash_embedder.install)."""

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hash_embedder import install  # noqa: E402

if __name__ == "__main__":
    install()
    module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
