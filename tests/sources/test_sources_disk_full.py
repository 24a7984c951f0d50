"""Issue 44 (12): `talent unload` and the sweep of `talent load --replace` on a store that
cannot write (a full disk: the embedded server's ENOSPC, or a server answering MISCONF) end
with one error line and exit 2, as `talent load` does, not a traceback; once there is
space, the next command finishes the unload."""

from __future__ import annotations

import errno
import json

import pytest
import redis
from test_sources import TRIPLES, write_kb

from talent_core.store.cypher_store import CypherStore

ENOSPC = OSError(errno.ENOSPC, "no space left on device: the embedded FalkorDB server could "
                 "not write its append-only file and stopped", "/data/appendonlydir")
MISCONF = redis.ResponseError("MISCONF Errors writing to the AOF file: No space left on device")


def _one_error_line(r, *words: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.output and all(w in lines[0] for w in words), lines


@pytest.mark.parametrize("failure", [ENOSPC, MISCONF], ids=["enospc", "misconf"])
def test_unload_on_a_full_disk_is_one_line_and_exit_2(cli, monkeypatch, failure):
    def full(*_a, **_k):
        raise failure

    sweep = CypherStore.sweep_entities
    monkeypatch.setattr(CypherStore, "sweep_entities", full)
    r = cli(["unload", "part1.txt"])
    _one_error_line(r, "No space left on device" if failure is MISCONF
                    else "no space left on device", "talent unload part1.txt")  # fmt: skip
    monkeypatch.setattr(CypherStore, "sweep_entities", sweep)  # space again: the next
    r = cli(["sources", "--json"])  # command finishes the unload
    assert r.exit_code == 0, r.output
    assert [s["name"] for s in json.loads(r.stdout)["sources"]] == ["part2.txt"]


def test_replace_sweep_on_a_full_disk_is_one_line_and_exit_2(cli, monkeypatch, tmp_path):
    def full(*_a, **_k):
        raise ENOSPC

    v2 = write_kb(tmp_path / "v2.txt", TRIPLES[70:110])
    monkeypatch.setattr(CypherStore, "retract", full)
    r = cli(["load", str(v2), "--format", "metaqa", "--replace", "part2.txt", "--no-progress"])
    _one_error_line(r, "/data/appendonlydir: no space left on device", "--replace part2.txt")
