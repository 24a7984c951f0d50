"""Helpers for the loader tests: fixture paths, an in-memory GraphStore, the shared data
location, and a subprocess runner for the `talent` CLI (`python -m talent_core`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from talent_core.models import Edge, StoreStats

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
BAD = FIXTURES / "bad"


def shared_data_dir() -> Path | None:
    for cand in (REPO / ".." / "shared" / "data", Path("/work/shared/data")):
        if (cand / "README.md").is_file() or (cand / "metaqa").is_dir():
            return cand.resolve()
    return None


SHARED = shared_data_dir()


class FakeStore:
    """In-memory GraphStore with the write/ack semantics the loader relies on; it records
    every call so tests can check what was written, in which order, and how often."""

    dialect = "fake"

    def __init__(self) -> None:
        self.entities: dict[str, tuple[str, np.ndarray | None]] = {}
        self.relations: dict[str, np.ndarray] = {}
        self.triples: set[tuple[str, str, str]] = set()
        self.calls: list[tuple[str, int]] = []
        self.fail_on_triples_call: int | None = None  # simulate a store failure
        self.dimension: int | None = None

    def ensure_schema(self, dimension: int) -> None:
        self.dimension = dimension

    def upsert_entities(self, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        self.calls.append(("entities", len(rows)))
        for i, name, vec in rows:
            self.entities[i] = (name, np.asarray(vec, dtype=np.float32))

    def upsert_relations(self, rows: Sequence[tuple[str, Sequence[float]]]) -> None:
        self.calls.append(("relations", len(rows)))
        for name, vec in rows:
            self.relations[name] = np.asarray(vec, dtype=np.float32)

    def upsert_triples(self, edges: Sequence[Edge]) -> None:
        n = sum(1 for c in self.calls if c[0] == "triples") + 1
        if self.fail_on_triples_call == n:
            raise ConnectionError("simulated store failure")
        self.calls.append(("triples", len(edges)))
        for e in edges:
            if e.src not in self.entities or e.dst not in self.entities:
                raise AssertionError(f"edge {e} before its entities")
            if e.rel not in self.relations:
                raise AssertionError(f"edge {e} before its relation")
            self.triples.add((e.src, e.rel, e.dst))

    def existing_entities(self, ids: Sequence[str]) -> set[str]:
        return {i for i in ids if i in self.entities and self.entities[i][1] is not None}

    def existing_relations(self, names: Sequence[str]) -> set[str]:
        return {n for n in names if n in self.relations}

    def stats(self) -> StoreStats:
        return StoreStats(
            entities=len(self.entities),
            relations=len(self.relations),
            triples=len(self.triples),
            entities_with_embedding=sum(v is not None for _, v in self.entities.values()),
            store="fake",
        )

    def close(self) -> None:
        pass


# the loaders' CLI in a subprocess, with the TEST-ONLY hash embedder selectable
CLI = [sys.executable, str(REPO / "tests" / "hash_cli.py"), "talent_core"]


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TALENT_DATA_DIR=str(data_dir),
        TALENT_EMBEDDING_MODEL="hash:16",  # test-only pseudo-embedder: no torch import
        TALENT_STORE="embedded",
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env


def run_cli(args: list[str], data_dir: Path, timeout: float = 120, **extra: str):
    return subprocess.run(
        [*CLI, *args],
        cwd=REPO,
        env=cli_env(data_dir, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,  # callers assert on the exit code
    )


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "2m") mounted at `where`: a disk that really fills up. Needs
    root (CI runs as root); the test is skipped, with the reason, where mount is refused."""
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                        str(where)], capture_output=True, text=True, check=False)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up ({(r.stderr or r.stdout).strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
