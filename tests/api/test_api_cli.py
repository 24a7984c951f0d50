"""`talent ask` answers through a running `talent serve` (no models loaded in the CLI
process): found by the discovery file in the data dir, or by TALENT_API_URL; the same
output (text and --json) as in-process; `--local`, no key, a stale discovery file and an
unreachable named server are each handled as documented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_helpers import free_port, serving

pytest.importorskip("httpx")
ARGS = ["who directed Gravity", "--topic", "Gravity"]


def talent_ask(env: dict[str, str], *args: str, key: str | None = None,
               url: str | None = None) -> subprocess.CompletedProcess:
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("TALENT_API_KEY", "TALENT_API_URL")}
    run_env.update(env)
    if key:
        run_env["TALENT_API_KEY"] = key
    if url:
        run_env["TALENT_API_URL"] = url
    return subprocess.run([sys.executable, "-m", "talent_core", "ask", *ARGS, "-v", *args],
                          env=run_env, capture_output=True, text=True, timeout=300,
                          cwd=env["TALENT_DATA_DIR"])


def without_timings(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "timings_ms"}


@pytest.fixture(scope="module")
def served(api_env, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve-cli") / "serve.log"
    with serving(api_env, log, "--preload") as (base, proc):
        yield base, proc
    # a clean shutdown withdraws the announcement
    assert not (Path(api_env["TALENT_DATA_DIR"]) / "api-server.json").exists()


def test_the_server_announces_itself_in_its_data_dir(api_env, served):
    base, proc = served
    info = json.loads((Path(api_env["TALENT_DATA_DIR"]) / "api-server.json").read_text())
    assert info["pid"] == proc.pid and info["url"] == base


def test_ask_through_the_server_prints_what_the_local_ask_prints(api_env, api_keys, served):
    remote = talent_ask(api_env, "--json", key=api_keys["read"])
    assert remote.returncode == 0, remote.stderr
    assert "answered by talent serve at" in remote.stderr
    assert "loading" not in remote.stderr.lower()  # no model load in the CLI process
    local = talent_ask(api_env, "--json", "--local", key=api_keys["read"])
    assert local.returncode == 0, local.stderr
    assert "answered by talent serve" not in local.stderr
    r, lo = json.loads(remote.stdout), json.loads(local.stdout)
    assert r["candidate"] and without_timings(r) == without_timings(lo)
    # the same stages; the server adds its model queue's (waiting for, holding a slot)
    assert set(r["timings_ms"]) == set(lo["timings_ms"]) | {"model_queue", "model_slot"}
    text_remote = talent_ask(api_env, key=api_keys["read"])
    text_local = talent_ask(api_env, "--local")
    assert text_remote.returncode == 0 and "answered by talent serve" in text_remote.stderr
    assert text_local.returncode == 0, text_local.stderr
    assert text_remote.stdout == text_local.stdout and "answer" in text_remote.stdout


def test_without_a_key_the_cli_answers_itself_and_says_why(api_env, served):
    out = talent_ask(api_env, "--json")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "TALENT_API_KEY is not set" in ln]
    assert len(lines) == 1 and served[0] in lines[0]
    assert json.loads(out.stdout)["candidate"]


def test_a_model_option_keeps_the_ask_local(api_env, api_keys, served):
    out = talent_ask(api_env, "--json", "--planner", "none", key=api_keys["read"])
    assert out.returncode == 0, out.stderr
    assert "--planner appl(y/ies) to this process only" in out.stderr
    assert "answered by talent serve" not in out.stderr


def test_a_refusal_of_the_server_is_the_cli_error(api_env, served):
    out = talent_ask(api_env, "--json", key="tk_00000000_" + "x" * 30)
    assert out.returncode == 2 and "401 invalid or revoked API key" in out.stderr
    assert out.stdout == ""


def test_a_stale_discovery_file_is_ignored(api_env, api_keys, tmp_path):
    data = Path(api_env["TALENT_DATA_DIR"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs
    port = free_port()
    path = data / "api-server.json"
    path.write_text(json.dumps({"url": f"http://127.0.0.1:{port}", "host": "127.0.0.1",
                                "port": port, "pid": dead.pid}))
    try:
        out = talent_ask(api_env, "--json", key=api_keys["read"])
    finally:
        path.unlink()
    assert out.returncode == 0, out.stderr
    assert "answered by talent serve" not in out.stderr and "cannot reach" not in out.stderr
    assert json.loads(out.stdout)["candidate"]


def test_a_named_server_that_cannot_be_reached_is_an_error(api_env, api_keys):
    url = f"http://127.0.0.1:{free_port()}"
    out = talent_ask(api_env, "--json", key=api_keys["read"], url=url)
    assert out.returncode == 2 and f"cannot reach talent serve at {url}" in out.stderr
    out = talent_ask(api_env, "--json", url=url)
    assert out.returncode == 2 and "TALENT_API_KEY is not set" in out.stderr


def test_the_client_browses_as_the_store_does(api_env, api_keys, served):
    """`ApiClient.entities` / `.neighbourhood` (the Explore page in API mode) give what the
    library gives on the store: the same matches, neighbours, and the first-n "more"."""
    from talent_core.api.client import ApiClient
    from talent_core.config import Settings
    from talent_core.explore import EXPLORE_CAPS, expand_step, find_entities, limit_caps, one_hop
    from talent_core.pipeline import Pipeline

    base, _ = served
    client = ApiClient(base, api_keys["read"])
    pipe = Pipeline(settings=Settings(data_dir=Path(api_env["TALENT_DATA_DIR"]),
                                      _env_file=None))  # fmt: skip
    try:
        local = find_entities(pipe.store, pipe.embedder, "Gravity", k=5,
                              fuzzy_threshold=pipe.retrieval.link_threshold
                              if pipe.retrieval.fuzzy_link else None)  # fmt: skip
        remote = client.entities("Gravity", k=5)
        assert [(m.entity.id, m.how) for m in remote] == [(m.entity.id, m.how) for m in local]
        for got, want in ((one_hop(client, "Gravity", EXPLORE_CAPS),
                           one_hop(pipe.store, "Gravity", EXPLORE_CAPS)),
                          (expand_step(client, "Gravity", 1),
                           expand_step(pipe.store, "Gravity", 1))):
            assert got.node_ids() == want.node_ids() and got.truncated == want.truncated
            assert {(e.src, e.rel, e.dst) for e in got.edges} == {
                (e.src, e.rel, e.dst) for e in want.edges}
        first = client.neighbourhood(["Gravity"], 1, limit_caps(1))
        assert len(first.nodes) == 2 and first.truncated
    finally:
        pipe.close()


STANCE_ARGS = ["--stance", "Cannabis should be legal.", "Marijuana is harmless.",
               "--graph", "(cannabis; synonym of; marijuana)(marijuana; not capable of; harm)"]


def test_stance_through_the_server_prints_what_the_local_stance_prints(api_env, api_keys,
                                                                         served):
    env = {k: v for k, v in os.environ.items() if k not in ("TALENT_API_KEY", "TALENT_API_URL")}
    # named: test_a_stale_discovery_file_is_ignored removed the announcement
    env.update(api_env, TALENT_API_KEY=api_keys["read"], TALENT_API_URL=served[0])

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "talent_core", "ask", *STANCE_ARGS, "-v",
                               *extra], env=env, capture_output=True, text=True, timeout=300,
                              cwd=env["TALENT_DATA_DIR"])

    remote, local = run("--json"), run("--json", "--local")
    assert "loading" not in remote.stderr.lower()  # no model load in the CLI process
    assert remote.returncode == 0 and "answered by talent serve" in remote.stderr, remote.stderr
    assert local.returncode == 0 and "answered by talent serve" not in local.stderr
    r, lo = json.loads(remote.stdout), json.loads(local.stdout)
    assert r["label"] in ("support", "counter") and r["graph_source"] == "given"
    assert without_timings(r) == without_timings(lo)
    bad = run("--graph", "(a; b)")  # the later --graph wins
    assert bad.returncode == 2 and "graph:" in bad.stderr and bad.stdout == ""


def test_the_client_loads_lists_and_removes_a_source(api_env, api_keys, served):
    """What the Load page does through `talent serve`: a multipart upload polled to the
    end with exact counts and its rejected rows, the sources listed, one removed."""
    import time

    from talent_core.api.client import ApiClient
    from talent_core.errors import ApiClientError

    base, _ = served
    client = ApiClient(base, api_keys["write"])
    before = client.stats()
    rows = [f"Client Film {i}|directed_by|Client Person {i % 3}" for i in range(40)]
    rows.insert(7, "no pipes here")
    job = client.start_load("client_kb.txt", ("\n".join(rows) + "\n").encode(), "metaqa",
                            on_error="skip")
    deadline = time.time() + 60
    while job["status"] in ("queued", "running"):
        assert time.time() < deadline, job
        time.sleep(0.05)
        job = client.load(job["id"])
    assert job["status"] == "done", job
    assert (job["result"]["loaded"], job["result"]["rejected"]) == (40, 1)
    assert b"no pipes here" in client.load_rejects(job["id"])
    info = {s.name: s for s in client.sources().sources}["client_kb.txt"]
    assert info.triples == 40 and info.rejected == 1
    assert client.stats().triples == before.triples + 40
    change = client.remove_source("client_kb.txt")
    assert change.triples_deleted == 40 and change.entities_deleted == 43
    assert client.stats() == before
    with pytest.raises(ApiClientError) as e:
        client.remove_source("client_kb.txt")
    assert e.value.status == 404
    with pytest.raises(ApiClientError) as e:
        ApiClient(base, api_keys["read"]).start_load("x_kb.txt", b"A|r|B\n", "metaqa")
    assert e.value.status == 403
