"""Where the candidate S misses on the WebQSP-evidence dev questions (issue 29's S target):
for each question whose S (default settings, retrieval only) holds no gold answer, the
shortest distance from its topic entity to a gold answer in the merged KG of all records
(names compared by `normalise_name`; None: not within --max-hops, or no gold name in the
KG), and the topic's degree. Says how many misses any retrieval could still catch.

    TALENT_DATA_DIR=.talent/b/webqsp TALENT_QUESTION_FORMAT=rog python \
        bench/webqsp_s_misses.py ../shared/data/webqsp-evidence/dev.jsonl \
        .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl \
        --out bench/results/webqsp_s_misses.json
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from benchio import load_average, write_json_atomic

from talent_core.pipeline import Pipeline
from talent_core.text import normalise_name


def distance(adj: dict[str, set[str]], src: str, golds: set[str], max_hops: int) -> int | None:
    seen, front = {src}, {src}
    for d in range(1, max_hops + 1):
        front = {y for x in front for y in adj[x]} - seen
        if front & golds:
            return d
        seen |= front
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=Path, help="the RoG-shaped dev.jsonl (its graphs merged)")
    ap.add_argument("questions", type=Path, help="the loaded questions file (talent load)")
    ap.add_argument("--max-hops", type=int, default=4)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    adj: dict[str, set[str]] = collections.defaultdict(set)
    for line in a.records.read_text(encoding="utf-8").splitlines():
        for h, _, t in json.loads(line)["graph"]:
            adj[normalise_name(h)].add(normalise_name(t))
            adj[normalise_name(t)].add(normalise_name(h))
    pipe = Pipeline()
    rows = []
    for line in a.questions.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        cand = pipe.retrieve(q["question"], q["q_entity"])
        golds = {normalise_name(x) for x in q["answer"]}
        hit = bool({normalise_name(n.name) for n in cand.nodes} & golds)
        topic = normalise_name(q["q_entity"][0]) if q["q_entity"] else ""
        rows.append({"id": q["id"], "hit": hit, "size": len(cand.nodes),
                     "topic_in_kg": topic in adj, "degree": len(adj.get(topic, ())),
                     "distance": distance(adj, topic, golds, a.max_hops)
                     if topic in adj else None})
    misses = [r for r in rows if not r["hit"]]
    out = {
        "questions": len(rows),
        "s_hit": round(sum(r["hit"] for r in rows) / len(rows), 4),
        "s_nodes": round(sum(r["size"] for r in rows) / len(rows), 2),
        "misses": len(misses),
        "misses_topic_not_in_kg": sum(not r["topic_in_kg"] for r in misses),
        "misses_by_distance": {str(k): v for k, v in sorted(
            collections.Counter(r["distance"] for r in misses if r["topic_in_kg"]).items(),
            key=lambda kv: (kv[0] is None, kv[0] or 0))},
        "ceiling_within_3_hops": round((sum(r["hit"] for r in rows) + sum(
            1 for r in misses if r["distance"] is not None and r["distance"] <= 3))
            / len(rows), 4),
        "miss_rows": misses,
        "load": load_average(),
    }
    print(json.dumps({k: v for k, v in out.items() if k != "miss_rows"}, indent=1))
    if a.out:
        write_json_atomic(a.out, out)


if __name__ == "__main__":
    main()
