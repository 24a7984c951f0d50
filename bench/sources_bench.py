"""Sources on MetaQA (issue 33): unload / replace equal fresh loads; their times; load and
idempotent reload times before / after sources were recorded.

Parts (each writes its section of bench/results/sources_metaqa.json, with `uptime`):

  timing   MetaQA kb.txt into a fresh embedded graph (bulk path), then the same file again
           (idempotent reload through MERGE): with this checkout's code, and with `--code
           head` the committed code before this change (a `pip install --target` of `git
           archive HEAD`, given as --head-site), in a subprocess.
  counts   MetaQA as two overlapping sources, part1 = lines 1-80,000 and part2 = lines
           60,001-133,582 (written under --work): unload part1, then compare with a fresh
           load of part2 alone (entities, entities with a vector, relations, triples, the
           triple sets) and with the counts computed from the file itself. Then kb.txt as
           one source, replaced by a version that drops 1,000 of its triples and adds 1,000
           (800 between existing entities, 200 naming new ones): compared with a fresh
           load of that version; the 1-hop neighbourhood of 300 entities no diff triple
           touches is the same before and after (what retrieval reads of the store).
Embeddings: the TEST-ONLY hash embedder at 384 dimensions (tests/hash_embedder.py; MiniLM's
size, no model run: the times are the store's and the loader's, not embedding).

    OMP_NUM_THREADS=1 python bench/sources_bench.py timing
    OMP_NUM_THREADS=1 python bench/sources_bench.py timing --code head --head-site /tmp/b_head_site
    OMP_NUM_THREADS=1 python bench/sources_bench.py counts
    OMP_NUM_THREADS=1 python bench/sources_bench.py legacy --head-site /tmp/b_head_site

  legacy   kb.txt lines 1-20,000 loaded by the committed code (as `timing --code head`),
           then this code: `talent sources` finds its triples as `legacy`; lines
           10,001-30,000 loaded as a source on top; unloading `legacy` leaves what a fresh
           load of that source alone gives.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "sources_metaqa.json"
KB = ROOT.parent / "shared" / "data" / "metaqa" / "kb.txt"
DIM = 384


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def save(part: str, data: dict) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from benchio import write_json_atomic

    out = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if part.startswith("timing"):  # runs are kept: before / after interleave under load
        out.setdefault(part + "_runs", []).append(data)
    else:
        out[part] = data
    write_json_atomic(RESULTS, out)


def _imports():
    sys.path.insert(0, str(ROOT / "tests"))
    from hash_embedder import HashEmbedder

    from talent_core.config import Settings
    from talent_core.loaders.api import load_path
    from talent_core.store.falkordb import FalkorDBStore

    return HashEmbedder, Settings, load_path, FalkorDBStore


def timing(args: argparse.Namespace) -> dict:
    HashEmbedder, Settings, load_path, FalkorDBStore = _imports()
    work = Path(args.work) / f"timing-{args.code}"
    shutil.rmtree(work, ignore_errors=True)
    store = FalkorDBStore(work, "metaqa")
    emb = HashEmbedder(DIM)
    settings = Settings(data_dir=work)
    out: dict = {"code": args.code, "uptime_before": uptime()}
    try:
        store.ensure_schema(DIM)
        store.stats()  # the server start is not part of the load
        for name in ("first_load", "reload", "reload_2"):
            t = time.perf_counter()
            r = load_path(KB, "metaqa", store=store, embedder=emb, settings=settings,
                          progress=False)  # fmt: skip
            out[name] = {"seconds": round(time.perf_counter() - t, 3),
                         "bulk_batches": r.bulk_batches, "new_triples": r.new_triples,
                         "store_seconds_by_call": {k: round(v, 3) for k, v in
                                                   r.store_seconds_by_call.items()},
                         "source_id": getattr(r, "source_id", None),
                         "stats": r.store_after.model_dump() if r.store_after else None}
    finally:
        store.stop_server()
        shutil.rmtree(work, ignore_errors=True)
    out["uptime_after"] = uptime()
    return out


def _counts_of_file(path: Path) -> dict:
    """Entities, relations and unique triples of a MetaQA file, computed from the text."""
    triples = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            h, r, t = (x.strip() for x in line.split("|"))
            triples.add((h, r, t))
    ents = {x for h, _, t in triples for x in (h, t)}
    return {"entities": len(ents), "entities_with_embedding": len(ents),
            "relations": len({r for _, r, _ in triples}), "triples": len(triples)}


def _all_triples(store) -> set:
    out = set()
    for s in {0, *store.source_counts()}:
        out |= store.source_triples(s)
    return out


def _stats(store) -> dict:
    return store.stats().model_dump(exclude={"store"})


def counts(args: argparse.Namespace) -> dict:
    HashEmbedder, Settings, load_path, FalkorDBStore = _imports()
    from talent_core.loaders.sources import list_sources, replace_source, unload_source
    from talent_core.store.base import ExpansionCaps

    work = Path(args.work)
    shutil.rmtree(work / "counts", ignore_errors=True)
    lines = KB.read_text(encoding="utf-8").splitlines(keepends=True)
    part1, part2 = work / "part1.txt", work / "part2.txt"
    part1.write_text("".join(lines[:80000]), encoding="utf-8")
    part2.write_text("".join(lines[60000:]), encoding="utf-8")
    emb = HashEmbedder(DIM)
    data = work / "counts"
    settings = Settings(data_dir=data)

    def fresh(graph: str):
        s = FalkorDBStore(data, graph)
        s.clear()
        s.ensure_schema(DIM)
        return s

    def load(path, store, **kw):
        t = time.perf_counter()
        r = load_path(path, "metaqa", store=store, embedder=emb, settings=settings,
                      progress=False, **kw)  # fmt: skip
        return r, round(time.perf_counter() - t, 3)

    out: dict = {"uptime_before": uptime(), "embedder": f"hash:{DIM} (test-only)"}
    two = fresh("two")
    _, out["load_part1_s"] = load(part1, two)
    _, out["load_part2_s"] = load(part2, two)
    out["sources_before_unload"] = [s.model_dump() for s in list_sources(two).sources]
    t = time.perf_counter()
    change = unload_source(two, "part1.txt", settings.batch_size)
    out["unload_part1"] = {"seconds": round(time.perf_counter() - t, 3),
                           **change.model_dump(exclude={"store_before", "store_after"})}
    alone = fresh("part2")
    load(part2, alone)
    out["after_unload"] = _stats(two)
    out["fresh_part2"] = _stats(alone)
    out["part2_from_file"] = _counts_of_file(part2)
    out["unload_equal"] = (out["after_unload"] == out["fresh_part2"] == out["part2_from_file"]
                           and _all_triples(two) == _all_triples(alone))
    for s in (two, alone):
        s.clear()

    # --replace: kb.txt, then a version with 1,000 triples dropped and 1,000 added
    rng = random.Random(0)
    kb_triples = list(dict.fromkeys(tuple(x.strip() for x in ln.split("|"))
                                    for ln in lines if ln.strip()))  # fmt: skip
    kb_set = set(kb_triples)
    dropped = set(rng.sample(kb_triples, 1000))
    heads = sorted({h for h, _, _ in kb_triples})
    by_rel: dict[str, list[str]] = {}
    for _, r, t in kb_triples:
        by_rel.setdefault(r, []).append(t)
    rels = sorted(by_rel)
    added: list[tuple[str, str, str]] = []
    while len(added) < 800:
        r = rng.choice(rels)
        x = (rng.choice(heads), r, rng.choice(by_rel[r]))
        if x not in kb_set and x not in added:
            added.append(x)
    added += [(rng.choice(heads), rng.choice(rels), f"New Entity {i}") for i in range(200)]
    v2 = work / "kb_v2.txt"
    v2.write_text("".join(f"{h}|{r}|{t}\n" for h, r, t in kb_triples if (h, r, t) not in dropped)
                  + "".join(f"{h}|{r}|{t}\n" for h, r, t in added), encoding="utf-8")
    full = fresh("full")
    _, out["load_kb_s"] = load(KB, full, source="kb")
    found = full.name_collisions()
    out["name_collisions"] = {"names": len(found), "entities": sum(c.count for c in found),
                              "top": [c.model_dump() for c in found[:5]]}
    touched = {x for h, _, t in (*dropped, *added) for x in (h, t)}
    untouched = rng.sample(sorted(set(heads) - touched), 300)  # no diff triple on them
    caps = ExpansionCaps(fanout=1000, max_nodes=100000, max_edges=100000)

    def hoods(store):
        res = {}
        for i in untouched:
            sub = store.neighbourhood([i], 1, caps)
            res[i] = sorted((e.src, e.rel, e.dst) for e in sub.edges)
        return res

    before = hoods(full)
    t = time.perf_counter()
    report, change = replace_source(v2, "kb", "metaqa", store=full, settings=settings,
                                    embedder=emb, progress=False)  # fmt: skip
    out["replace_1pct"] = {"seconds": round(time.perf_counter() - t, 3),
                           "load_seconds": round(report.seconds, 3),
                           **change.model_dump(exclude={"store_before", "store_after"})}
    out["untouched_neighbourhoods_same"] = hoods(full) == before
    out["untouched_entities"] = len(untouched)
    again = fresh("v2")
    load(v2, again, source="kb")
    out["after_replace"] = _stats(full)
    out["fresh_v2"] = _stats(again)
    out["v2_from_file"] = _counts_of_file(v2)
    out["replace_equal"] = (out["after_replace"] == out["fresh_v2"] == out["v2_from_file"]
                            and _all_triples(full) == _all_triples(again))
    out["sources_after_replace"] = [s.model_dump() for s in list_sources(full).sources]
    for s in (full, again):
        s.clear()
    full.stop_server()
    shutil.rmtree(data, ignore_errors=True)
    out["uptime_after"] = uptime()
    return out


def legacy_load(args: argparse.Namespace) -> dict:
    """The committed code (child process): kb.txt lines 1-20,000 into a fresh graph."""
    HashEmbedder, Settings, load_path, FalkorDBStore = _imports()
    work = Path(args.work) / "legacy"
    shutil.rmtree(work, ignore_errors=True)
    store = FalkorDBStore(work, "legacy")
    part = Path(args.work) / "legacy0.txt"
    try:
        r = load_path(part, "metaqa", store=store, embedder=HashEmbedder(DIM),
                      settings=Settings(data_dir=work), progress=False)  # fmt: skip
        return {"stats": r.store_after.model_dump(), "bulk_batches": r.bulk_batches}
    finally:
        store.stop_server()


def legacy(args: argparse.Namespace) -> dict:
    """A store the committed code loaded, read and changed by this code: its triples are the
    source `legacy`; a new source on top; unloading legacy leaves what a fresh load of the
    new source alone gives."""
    HashEmbedder, Settings, load_path, FalkorDBStore = _imports()
    from talent_core.loaders.sources import list_sources, unload_source

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    lines = KB.read_text(encoding="utf-8").splitlines(keepends=True)
    (work / "legacy0.txt").write_text("".join(lines[:20000]), encoding="utf-8")
    new = work / "legacy1.txt"
    new.write_text("".join(lines[10000:30000]), encoding="utf-8")
    boot = ("import sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in "
            "repr(f).lower()]; import runpy; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    res = subprocess.run([sys.executable, "-c", boot, str(Path(__file__).resolve()), "legacy",
                          "--work", args.work, "--child"], cwd="/tmp",
                         env=dict(os.environ, PYTHONPATH=args.head_site), capture_output=True,
                         text=True, check=False)  # fmt: skip
    out: dict = {"uptime_before": uptime(),
                 "committed_code_load": json.loads(res.stdout.strip().splitlines()[-1])}
    data = work / "legacy"
    store = FalkorDBStore(data, "legacy")
    settings = Settings(data_dir=data)
    emb = HashEmbedder(DIM)
    try:
        out["sources_as_found"] = [x.model_dump() for x in list_sources(store).sources]
        r = load_path(new, "metaqa", store=store, embedder=emb, settings=settings,
                      progress=False)  # fmt: skip
        out["load_new_source"] = {"source_id": r.source_id, "new_triples": r.new_triples,
                                  "asserted_new": r.asserted_new}
        out["sources_after_load"] = [x.model_dump() for x in list_sources(store).sources]
        change = unload_source(store, "legacy", settings.batch_size)
        out["unload_legacy"] = change.model_dump(exclude={"store_before", "store_after"})
        fresh = FalkorDBStore(data, "fresh")
        fresh.clear()
        fresh.ensure_schema(DIM)
        load_path(new, "metaqa", store=fresh, embedder=emb, settings=settings, progress=False)
        out["after_unload"] = _stats(store)
        out["fresh_new_source"] = _stats(fresh)
        out["new_source_from_file"] = _counts_of_file(new)
        out["equal"] = (out["after_unload"] == out["fresh_new_source"]
                        == out["new_source_from_file"]
                        and _all_triples(store) == _all_triples(fresh))
    finally:
        store.stop_server()
        shutil.rmtree(data, ignore_errors=True)
    out["uptime_after"] = uptime()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["timing", "counts", "legacy"])
    ap.add_argument("--code", choices=["current", "head"], default="current")
    ap.add_argument("--head-site", default="/tmp/b_head_site")
    ap.add_argument("--work", default="/tmp/b_sources_bench")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("TALENT_SERVER_IDLE_TIMEOUT", "0")
    if args.part == "timing" and args.code == "head" and not args.child:
        # the committed code: its install first on the path, the editable finder removed
        boot = ("import sys; sys.meta_path = [f for f in sys.meta_path if 'editable' not in "
                "repr(f).lower()]; import runpy; sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")
        env = dict(os.environ, PYTHONPATH=args.head_site)
        res = subprocess.run([sys.executable, "-c", boot, str(Path(__file__).resolve()),
                              "timing", "--code", "head", "--work", args.work, "--child"],
                             cwd="/tmp", env=env, capture_output=True, text=True, check=False)
        sys.stderr.write(res.stderr[-3000:])
        data = json.loads(res.stdout.strip().splitlines()[-1])
        save("timing_before", data)
        print(json.dumps(data, indent=1))
        return
    if args.part == "legacy":
        data = legacy_load(args) if args.child else legacy(args)
    else:
        data = timing(args) if args.part == "timing" else counts(args)
    if args.child:
        print(json.dumps(data))
        return
    save("timing_after" if args.part == "timing" else args.part, data)
    print(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
