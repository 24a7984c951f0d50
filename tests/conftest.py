"""Shared fixtures: graph stores for tests, and fake embeddings so tests need no model.

- `embedded_store(dimension=8, graph=None)`: factory of fresh FalkorDBStores with the schema
  ensured. One embedded server per test session (a session temp dir); every store gets its
  own graph key, deleted after the test.
- `graph_store`: a fresh, empty store with the schema for dimension 8, parametrised over
  ["falkordb", "neo4j"]; the Neo4j case is skipped unless NEO4J_URI is set (and then it
  CLEARS that database's :Entity/:Relation data before and after every test). Without
  NEO4J_URI in the environment, the connection of the server `make neo4j-up` started
  (`.talent/neo4j.env` of this checkout) is loaded into it, for the CLI subprocesses too.
- `read_store`: the same over ["falkordb", "memory", "neo4j"], for the read half of the
  contract (the in-memory store is filled through its upserts).
- `one_hot(i, dim=8)` / `fake_vector(key, dim=8)`: deterministic unit vectors, as fixtures
  returning the functions (plain functions of the same names live in this module).
"""

from __future__ import annotations

import os
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator

import numpy as np
import pytest

FAKE_DIM = 8

# Every embedded server a test starts, in this process or in a CLI subprocess (which
# inherits the environment), stops with the process that started it: a detached server
# (the product default, stopped after TALENT_SERVER_IDLE_TIMEOUT seconds without a client)
# would outlive the test run. Tests of the detached mode set the variable for their own
# subprocesses and stop what they start; `pytest_sessionfinish` stops any server left
# running under the run's temp dirs and names it.
os.environ["TALENT_SERVER_IDLE_TIMEOUT"] = "0"
# likewise `talent ask` answers in its own process unless a test asks for the warm model
# process (tests/e2e/test_warm_models.py): one would outlive the test that started it
os.environ["TALENT_MODEL_SERVER_IDLE_TIMEOUT"] = "0"


def _load_neo4j_env() -> None:
    from pathlib import Path

    from dotenv import dotenv_values

    from talent_core.config import NEO4J_ENV_FILE

    path = Path(__file__).resolve().parents[1] / NEO4J_ENV_FILE
    if os.environ.get("NEO4J_URI") or not path.is_file():
        return
    for key, value in dotenv_values(path).items():
        if key.startswith("NEO4J_") and value is not None:
            os.environ[key] = value


_load_neo4j_env()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)
    if base is None or not base.is_dir():
        return
    from talent_core.store.falkordb_server import PID_NAME, EmbeddedServer

    leaked = []
    for pidfile in base.rglob(PID_NAME):
        srv = EmbeddedServer.for_dir(pidfile.parent)
        if srv.started_here:
            if srv.mode != "owner":  # owner mode: stopped at this process's exit
                leaked.append(str(srv.data_dir))
                srv.stop()
            continue
        if srv.ping():
            leaked.append(str(srv.data_dir))
            srv.shutdown()
    if leaked:
        print("\nembedded servers left running by tests (stopped now): " + ", ".join(leaked),
              file=sys.stderr)


def one_hot(i: int, dim: int = FAKE_DIM) -> list[float]:
    """Unit vector e_(i mod dim): equal indices -> cosine 1, different -> cosine 0."""
    v = [0.0] * dim
    v[i % dim] = 1.0
    return v


def fake_vector(key: str | int, dim: int = FAKE_DIM) -> list[float]:
    """A deterministic pseudo-random unit vector per key (same key, same vector)."""
    rng = np.random.default_rng(zlib.crc32(str(key).encode("utf-8")))
    v = rng.standard_normal(dim)
    return (v / np.linalg.norm(v)).tolist()


@pytest.fixture(name="one_hot")
def _one_hot() -> Callable[..., list[float]]:
    return one_hot


@pytest.fixture(name="fake_vector")
def _fake_vector() -> Callable[..., list[float]]:
    return fake_vector


@pytest.fixture(scope="session")
def _embedded_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from talent_core.store.falkordb_server import EmbeddedServer

    d = tmp_path_factory.mktemp("falkordb")
    yield d
    EmbeddedServer.for_dir(d).stop()


@pytest.fixture
def embedded_store(_embedded_data_dir: object) -> Iterator[Callable[..., object]]:
    """Factory: `embedded_store(dimension=8, graph=None)` -> FalkorDBStore, schema ensured."""
    from pathlib import Path

    from talent_core.store.falkordb import FalkorDBStore

    made: list[FalkorDBStore] = []

    def make(dimension: int = FAKE_DIM, graph: str | None = None) -> FalkorDBStore:
        store = FalkorDBStore(Path(str(_embedded_data_dir)), graph or f"t_{uuid.uuid4().hex}")
        store.ensure_schema(dimension)
        made.append(store)
        return store

    yield make
    for store in made:
        store.clear()
        store.close()


def _neo4j_store() -> object:
    from talent_core.config import Settings
    from talent_core.store.neo4j import Neo4jStore

    return Neo4jStore.from_settings(Settings(store="neo4j"))


@pytest.fixture(
    params=["falkordb", pytest.param("neo4j", marks=pytest.mark.neo4j)],
)
def graph_store(request: pytest.FixtureRequest, embedded_store: Callable[..., object]):
    """A fresh, empty store (schema for dimension 8) of each kind."""
    yield from _fresh_store(request.param, embedded_store)


@pytest.fixture(
    params=["falkordb", "memory", pytest.param("neo4j", marks=pytest.mark.neo4j)],
)
def read_store(request: pytest.FixtureRequest, embedded_store: Callable[..., object]):
    """A fresh, empty store of each kind that serves the read half of the contract."""
    yield from _fresh_store(request.param, embedded_store)


def _fresh_store(kind: str, embedded_store: Callable[..., object]) -> Iterator[object]:
    if kind == "falkordb":
        yield embedded_store(FAKE_DIM)
        return
    if kind == "memory":
        from talent_core.store.memory import MemoryStore

        yield MemoryStore()
        return
    if not os.environ.get("NEO4J_URI"):
        if os.environ.get("TALENT_REQUIRE_NEO4J"):  # .ci/run: no Neo4j test may skip there
            pytest.fail("TALENT_REQUIRE_NEO4J is set but NEO4J_URI is not (`make neo4j-up`)")
        pytest.skip(
            "NEO4J_URI not set: run `make neo4j-up` (or `docker compose up -d neo4j`, then "
            "NEO4J_URI=bolt://localhost:7687 NEO4J_PASSWORD=... pytest tests/contract)"
        )
    store = _neo4j_store()
    store.clear()
    store.ensure_schema(FAKE_DIM)
    yield store
    store.clear()
    store.close()
