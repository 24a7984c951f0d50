"""Issue 15, the store side: keys and names that cannot round-trip are refused before any
write; names that are accepted round-trip byte-exactly through load -> stats -> lookup ->
reload (property-based); the embedded server's files are private, its socket path cannot
be pre-created or swapped by another user, it does not outlive a kill -9'd owner, and two
loaders started at once on a fresh data dir both succeed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from talent_core.models import Edge
from talent_core.store.base import ExpansionCaps
from talent_core.store.data_dir import private_dir_problem
from talent_core.text import key_problem

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "loaders"))
from loader_helpers import cli_env, run_cli  # noqa: E402


def one_hot(i: int, dim: int = 8) -> list[float]:
    """As tests/conftest.py's fixture (test modules cannot import conftest portably)."""
    v = [0.0] * dim
    v[i % dim] = 1.0
    return v


BAD_KEYS = ["a\x01b", "a\x1b[2Jb", "a\x7f", "\ud800x", "a\x00b"]


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


# --- keys and names the stores refuse up front -------------------------------------------


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_unstorable_keys_and_names_are_refused_before_any_write(read_store, bad):
    store = read_store
    if not hasattr(store, "upsert_entities"):
        pytest.skip("read-only store")
    before = store.stats()
    with pytest.raises(ValueError, match="nothing of this call was written"):
        store.upsert_entities([("ok1", "ok1", one_hot(0)), (bad, "x", one_hot(1))])
    with pytest.raises(ValueError, match="nothing of this call was written"):
        store.upsert_entities([("ok2", f"name {bad}", one_hot(0))])
    with pytest.raises(ValueError, match="nothing of this call was written"):
        store.upsert_relations([(f"r{bad}", one_hot(2))])
    store.upsert_entities([("ok3", "ok3", one_hot(3))])
    with pytest.raises(ValueError, match="nothing of this call was written"):
        store.upsert_triples(
            [Edge(src="ok3", rel="r", dst="ok3"), Edge(src="ok3", rel="r", dst=bad)]
        )
    after = store.stats()
    assert (after.entities, after.triples) == (before.entities + 1, before.triples)
    assert store.entities_by_id([bad]) == []  # a lookup of such a key finds nothing


def test_control_character_u0001_cannot_duplicate_entities(embedded_store):
    """Before: U+0001 (FalkorDB's index separator) was stored but never found again, so
    each load added one more Entity (2 -> 3 -> 4)."""
    store = embedded_store(8)
    for _ in range(3):
        with pytest.raises(ValueError):
            store.upsert_entities([("a\x01b", "a\x01b", one_hot(0))])
    assert store.stats().entities == 0


# --- property: accepted names round-trip exactly; the others are bad rows ------------------

# any text but lone surrogates (a file cannot hold them: they are tested separately), with
# the control characters and whitespace that matter drawn often
_ALPHABET = st.one_of(
    st.characters(exclude_categories=("Cs",)),
    st.sampled_from(list("\x00\x01\x07\x1b\x7f\x85\x9b\t\n\r \u00a0\u2028\ufeff\"'\\|,;")),
)
NAMES = st.text(_ALPHABET, min_size=1, max_size=12)


def _expect(name: str) -> str | None:
    """The key a loader stores for `name` (stripped), or None when it must reject it."""
    key = name.strip()
    return key if key_problem(key) is None and len(key) <= 4096 else None


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=6))
def test_property_names_round_trip_through_load_stats_and_lookup(
    embedded_store, tmp_path_factory, pairs
):
    from hash_embedder import HashEmbedder

    from talent_core.config import Settings
    from talent_core.loaders.api import load_path

    store = embedded_store(16)
    tmp = tmp_path_factory.mktemp("prop")
    graph = [[h, "rel", t] for h, t in pairs]
    rec = {"id": "q", "question": "q?", "answer": [], "graph": graph}
    p = tmp / "g.jsonl"
    p.write_text(json.dumps(rec) + "\n", encoding="utf-8")  # JSON escapes every character
    good = {(_expect(h), _expect(t)) for h, t in pairs}
    good = {(h, t) for h, t in good if h is not None and t is not None}
    n_bad = sum(1 for h, t in pairs if _expect(h) is None or _expect(t) is None)

    def load():
        return load_path(p, "rog", store=store, embedder=HashEmbedder(16),
                         settings=Settings(data_dir=tmp / "data"), progress=False,
                         on_error="skip", rejects=tmp / "rej.jsonl")  # fmt: skip

    if not good:
        with pytest.raises(Exception, match="no valid rows"):
            load()
        assert store.stats().entities == 0
        return
    rep = load()
    ids = {x for pair in good for x in pair}
    s = store.stats()
    assert rep.rejected == n_bad
    assert (s.entities, s.triples, s.entities_with_embedding) == (len(ids), len(good), len(ids))
    got = {e.id: e.name for e in store.entities_by_id(sorted(ids))}
    assert got == {i: i for i in ids}  # byte-exact ids and names
    for i in ids:  # the name lookup retrieval seeds with finds it
        assert i in {e.id for e in store.entities_by_name([i])}
    sub = store.neighbourhood(sorted(ids), 1, ExpansionCaps(fanout=50, max_nodes=99, max_edges=99))
    assert {(e.src, e.rel, e.dst) for e in sub.edges} == {(h, "rel", t) for h, t in good}
    assert {n.id: n.name for n in sub.nodes} == {i: i for i in ids}
    load()  # idempotent: no duplicate entity or edge
    s2 = store.stats()
    assert (s2.entities, s2.triples) == (s.entities, s.triples)


# --- the embedded server: private files, private socket path ------------------------------


def _start(d: Path):
    from talent_core.store.falkordb import FalkorDBStore

    s = FalkorDBStore(d, "g")
    s.ensure_schema(8)
    s.upsert_entities([("a", "A", one_hot(0))])
    return s


def test_embedded_data_dir_and_files_are_private(tmp_path):
    d = tmp_path / "data"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    (d / "falkordb.log").write_text("old log\n")
    os.chmod(d / "falkordb.log", 0o644)
    s = _start(d)
    try:
        assert _mode(d) == 0o700
        files = [p for p in d.rglob("*") if not p.is_socket()]
        assert any(p.parent.name == "appendonlydir" for p in files)
        for p in files:
            assert _mode(p) & 0o077 == 0, (p, oct(_mode(p)))
    finally:
        s.stop_server()


def test_long_data_dir_socket_goes_through_a_private_unpredictable_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    d = tmp_path / ("long-" * 25) / "data"
    s = _start(d)
    try:
        sock = s.server.socket_path
        runtime = sock.parent.parent
        assert runtime.name.startswith("talent-") and runtime.name != f"talent-{os.getuid()}"
        assert _mode(runtime) == 0o700 and os.lstat(runtime).st_uid == os.geteuid()
        assert sock.parent.resolve() == d.resolve() and (d / "falkordb.sock").exists()
        assert s.stats().entities == 1
    finally:
        s.stop_server()
    assert not runtime.exists()  # removed with the server
    s2 = _start(d)  # a restart gets a fresh, differently named directory
    try:
        runtime2 = s2.server.socket_path.parent.parent
        assert runtime2 != runtime and runtime2.name.startswith("talent-")
        assert private_dir_problem(runtime2) is None
    finally:
        s2.stop_server()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create another user's directory")
def test_socket_dir_owned_by_another_user_or_group_readable_is_never_used(tmp_path, monkeypatch):
    xdg = Path(tempfile.mkdtemp(prefix="xdg-"))  # short: the link path must fit sun_path
    request_cleanup = shutil.rmtree
    os.chown(xdg, 65534, 65534)  # another user's XDG_RUNTIME_DIR
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    d = tmp_path / ("long-" * 25) / "data"
    s = _start(d)
    try:
        assert not str(s.server.socket_path).startswith(str(xdg))
    finally:
        s.stop_server()
    os.chown(xdg, 0, 0)
    os.chmod(xdg, 0o755)  # ours but world-readable: not private either
    s = _start(d)
    try:
        assert not str(s.server.socket_path).startswith(str(xdg))
    finally:
        s.stop_server()
    os.chmod(xdg, 0o700)  # ours and private: used
    s = _start(d)
    try:
        assert str(s.server.socket_path).startswith(str(xdg / "talent"))
        # an attacker's directory written into the record is refused (its owner is checked)
        evil = tmp_path / "evil"
        (evil / "d-x").mkdir(parents=True)
        os.chown(evil, 65534, 65534)
        record = d / "falkordb.socket"
        good = record.read_text()
        record.write_text(str(evil / "d-x" / "falkordb.sock") + "\n")
        assert not str(s.server.socket_path).startswith(str(evil))
        record.write_text(good)
    finally:
        s.stop_server()
        request_cleanup(xdg, ignore_errors=True)


# --- the embedded server does not outlive a kill -9'd owner --------------------------------

_OWNER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from talent_core.store.falkordb import FalkorDBStore
    s = FalkorDBStore(Path({data!r}), "g", keep_alive={keep!r})
    s.stats()
    print(s.server.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split(") ", 1)[1][0] != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("keep_alive", [False, True])
def test_kill_9_of_the_owner_stops_its_server_unless_kept_alive(tmp_path, keep_alive):
    from talent_core.store.falkordb_server import EmbeddedServer

    d = tmp_path / "data"
    code = _OWNER.format(repo=str(REPO), data=str(d), keep=keep_alive)
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(owner.stdout.readline())
        assert _alive(server_pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 20
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(server_pid) is keep_alive
    finally:
        if owner.poll() is None:
            owner.kill()
        if keep_alive:
            EmbeddedServer.for_dir(d).shutdown()
    if not keep_alive:
        assert "is gone; stopping it" in (d / "falkordb.log").read_text()


# --- two loaders at once on one fresh data dir ---------------------------------------------


def test_two_loaders_at_once_on_a_fresh_data_dir(tmp_path):
    kb = tmp_path / "kb.txt"
    kb.write_text("".join(f"e{i}|r{i % 5}|e{i + 1}\n" for i in range(300)))
    kb2 = tmp_path / "kb2.txt"
    kb2.write_text("".join(f"f{i}|r{i % 5}|f{i + 1}\n" for i in range(200)))
    for round_ in range(4):
        d = tmp_path / f"data{round_}"
        args = ["--format", "metaqa", "--no-progress", "--batch-size", "50"]
        procs = [
            subprocess.Popen(
                [sys.executable, str(REPO / "tests" / "hash_cli.py"), "talent_core", "load",
                 str(f), *args],  # fmt: skip
                cwd=REPO, env=cli_env(d), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            )
            for f in (kb, kb2)
        ]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (_, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
        r = run_cli(["stats", "--json"], d)
        st_ = json.loads(r.stdout)
        assert (st_["entities"], st_["relations"], st_["triples"]) == (301 + 201, 5, 500)


# --- exposure: no default Neo4j password, loopback-only published ports -------------------


def test_neo4j_has_no_default_password(monkeypatch):
    from talent_core.config import Settings
    from talent_core.store.neo4j import Neo4jStore

    monkeypatch.delenv("NEO4J_PASSWORD", raising=False)
    s = Settings(store="neo4j", neo4j_uri="bolt://127.0.0.1:1", _env_file=None)
    assert s.neo4j_password is None
    with pytest.raises(ValueError, match="NEO4J_PASSWORD"):
        Neo4jStore.from_settings(s)
    with pytest.raises(ValueError, match="NEO4J_PASSWORD"):
        Neo4jStore("bolt://127.0.0.1:1")


def test_compose_publishes_on_loopback_and_requires_a_password():
    yaml = pytest.importorskip("yaml")
    text = (REPO / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    ports = [p for svc in services.values() for p in svc.get("ports", [])]
    assert ports and all(p.startswith("${TALENT_BIND_ADDRESS:-127.0.0.1}:") for p in ports)
    assert "NEO4J_PASSWORD:?" in services["neo4j"]["environment"]["NEO4J_AUTH"]
    assert "NEO4J_PASSWORD:?" in services["app"]["environment"]["NEO4J_PASSWORD"]
    assert "reverse proxy" in text and "127.0.0.1:8501:8501" in (REPO / "Dockerfile").read_text()


def test_cluster_compose_keeps_the_exposure_rules_and_leaves_the_licence_to_the_user():
    """docker-compose.cluster.yml (issue 14; not run here, no Docker): loopback-only ports,
    no default password, the Enterprise licence not accepted on the user's behalf, the app
    on a routing URI, and nothing of the cluster's internal ports published."""
    yaml = pytest.importorskip("yaml")
    text = (REPO / "docker-compose.cluster.yml").read_text()
    services = yaml.safe_load(text)["services"]
    servers = {k: v for k, v in services.items() if k.startswith("server")}
    assert len(servers) == 3
    ports = [p for svc in services.values() for p in svc.get("ports", [])]
    assert ports and all(p.startswith("${TALENT_BIND_ADDRESS:-127.0.0.1}:") for p in ports)
    assert not any(p.endswith((":5000", ":6000", ":7000", ":7688")) for p in ports)
    for svc in servers.values():
        env = svc["environment"]
        assert svc["image"].startswith("neo4j:5.26") and svc["image"].endswith("-enterprise")
        assert "NEO4J_PASSWORD:?" in env["NEO4J_AUTH"]
        lic = env["NEO4J_ACCEPT_LICENSE_AGREEMENT"]
        assert lic.startswith("${NEO4J_ACCEPT_LICENSE_AGREEMENT:?"), lic  # no default value
        assert env["NEO4J_initial_server_mode__constraint"] == "PRIMARY"
        assert "healthcheck" in svc
    app = services["app"]["environment"]
    assert "NEO4J_PASSWORD:?" in app["NEO4J_PASSWORD"]
    assert app["NEO4J_URI"].startswith("neo4j://")
    assert "NOT RUN HERE" in text and "reverse proxy" in text


def test_a_server_that_works_without_answering_is_waited_for():
    """FalkorDB builds its vector indexes at start without answering (minutes on a
    2M-triple graph): a start that uses CPU is not timed out; one that idles is."""
    import subprocess
    import sys
    import time

    from talent_core.store.falkordb_server import _CpuWatch

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(1.5)  # past both interpreters' start-up
        watches = {p.pid: _CpuWatch(interval=0.3) for p in (busy, idle)}
        seen = {pid: [] for pid in watches}
        for _ in range(4):
            for pid, w in watches.items():
                seen[pid].append(w.working(pid))
            time.sleep(0.35)
        assert any(seen[busy.pid]) and not any(seen[idle.pid])
        assert _CpuWatch().working(None) is False
    finally:
        busy.kill()
        idle.kill()
