"""`talent` as tests/hash_cli.py runs it, with `TALENT_EMBEDDING_MODEL=hash:DIM` for the
query embedder too (`talent retrieve`), and, given `TALENT_TEST_STOP_AT=statement:N`,
stopping itself (SIGSTOP) just before the Nth write of that Cypher statement (`schema:N`:
the Nth schema creation, as a vector index rebuild runs after its drop), so that a test can
kill -9 it exactly there. Test-only."""

import os
import runpy
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hash_embedder import HashEmbedder, install, parse_hash_model  # noqa: E402

import talent_core.pipeline as pipeline  # noqa: E402
from talent_core.store.cypher_store import CypherStore  # noqa: E402
from talent_core.store.falkordb import FalkorDBStore  # noqa: E402

STOP = os.environ.get("TALENT_TEST_STOP_AT", ":0").rsplit(":", 1)
_seen = {"n": 0}


def _maybe_stop(name: str) -> None:
    if name == STOP[0]:
        _seen["n"] += 1
        if _seen["n"] == int(STOP[1]):
            os.kill(os.getpid(), signal.SIGSTOP)


_write, _schema, _get = CypherStore._write, FalkorDBStore._create_schema, pipeline.get_embedder


def _stopping_write(self, name, params=None):
    _maybe_stop(name)
    return _write(self, name, params)


def _stopping_schema(self, dimension):
    _maybe_stop("schema")
    return _schema(self, dimension)


def _get_embedder(model, *args, **kwargs):
    dim = parse_hash_model(model)
    return HashEmbedder(dim) if dim is not None else _get(model, *args, **kwargs)


if __name__ == "__main__":
    install()
    CypherStore._write = _stopping_write
    FalkorDBStore._create_schema = _stopping_schema
    pipeline.get_embedder = _get_embedder
    module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
