"""Linking on an identifier-style KG (issue 45), retrieval only (no language model): for each
question of a bracketed file and of its plain and typo twins (`bench/identifier_kg.py`),
whether the answer would abstain ("not in the KG": `linking.not_in_kg`) and whether the
anchors (`Pipeline(planner="none").retrieve(q).anchors`) hold the topic entity; with the
seeds' latency p50/p95 and the store's name reads per question. ``--code DIR``: import
talent_core from DIR (a copy of the code before a change), so before and after run the same
script; each run merges its figures into ``--out`` under ``--label``.

    TALENT_DATA_DIR=.talent/idkg/dd python bench/identifier_linking.py .talent/idkg \\
        --label after --kg underscore
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import re
import sys
import time
from pathlib import Path

from benchio import load_average, retrieval_bench_setup, write_json_atomic

ROOT = retrieval_bench_setup()
log = logging.getLogger("identifier_linking")
TOPIC = re.compile(r"\[([^\[\]]+)\]")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def counted(store, method: str, counts: dict[str, int]) -> None:
    """Count the calls of ``store.method`` in ``counts[method]``."""
    inner = getattr(store, method)

    def call(*args, **kwargs):
        counts[method] += 1
        return inner(*args, **kwargs)

    setattr(store, method, call)


def measure(pipeline, lines: list[str], topics: list[str], not_in_kg,
            counts: dict[str, int]) -> dict:
    """Abstention and anchor accuracy of ``lines`` (question<TAB>answers) whose topic
    entities (KG ids) are ``topics``, one per line; ``counts``: the store's reads (`counted`),
    reported per question."""
    for k in counts:
        counts[k] = 0
    abstained = anchored = linked = 0
    ms: list[float] = []
    misses: list[dict] = []
    for line, topic in zip(lines, topics, strict=True):
        question = line.split("\t")[0]
        t0 = time.perf_counter()
        cand = pipeline.retrieve(question)
        ms.append(cand.timings_ms.get("seeds", (time.perf_counter() - t0) * 1000))
        out = bool(not_in_kg(cand.links))
        hit = topic in cand.anchors
        ids = {i for lk in cand.links if lk.linked for i in (lk.id, *lk.shared)}
        abstained += out
        anchored += hit
        linked += topic in ids
        if not hit and len(misses) < 10:
            misses.append({"question": question, "topic": topic, "not_in_kg": out,
                           "anchors": cand.anchors[:3],
                           "links": [(lk.mention, lk.name, lk.how) for lk in cand.links]})
    n = len(lines)
    return {"n": n, "not_in_kg": round(abstained / n, 4), "anchor_is_topic": round(anchored / n, 4),
            "link_is_topic": round(linked / n, 4), "seeds_ms_p50": round(percentile(ms, 50), 1),
            "seeds_ms_p95": round(percentile(ms, 95), 1),
            "reads_per_question": {k: round(v / n, 2) for k, v in counts.items()},
            "misses": misses}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="bracketed.txt and plain.txt (identifier_kg.py)")
    ap.add_argument("--label", required=True, help="before / after")
    ap.add_argument("--kg", required=True, help="the KG's name in the results")
    ap.add_argument("--code", type=Path, help="import talent_core from this folder")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--forms", nargs="+", default=["bracketed", "plain", "typo"],
                    choices=["bracketed", "plain", "typo"])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                    "identifier_linking.json")
    args = ap.parse_args()
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
    import talent_core
    from talent_core.pipeline import Pipeline
    from talent_core.retrieval.linking import not_in_kg

    log.info("talent_core from %s", Path(talent_core.__file__).parent)
    pipeline = Pipeline(planner="none", question_format="metaqa")
    counts = dict.fromkeys(("fuzzy_names", "entities_by_name", "search_names"), 0)
    for method in counts:
        counted(pipeline.store, method, counts)
    res: dict = {}
    for form in ["bracketed", *(f for f in args.forms if f != "bracketed")]:
        lines = [ln for ln in (args.folder / f"{form}.txt").read_text(encoding="utf-8")
                 .splitlines() if ln.strip()]
        if args.limit:
            lines = lines[: args.limit]
        if form == "bracketed":  # the topic ids: the bracketed names as the KG holds them
            names = [TOPIC.search(ln).group(1) for ln in lines]
            by = {e.name: e.id for e in pipeline.store.entities_by_name(names)}
            topics = [by.get(n, n) for n in names]
        res[form] = measure(pipeline, lines, topics, not_in_kg, counts)
        log.info("%s %s %s: %s", args.kg, args.label, form,
                 {k: v for k, v in res[form].items() if k != "misses"})
    out = json.loads(args.out.read_text()) if args.out.exists() else {}
    out.setdefault("runs", {}).setdefault(args.kg, {})[args.label] = {
        "command": " ".join(sys.argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "load": load_average(),
        "code": str(Path(talent_core.__file__).parent), "questions": str(args.folder), **res}
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
