"""Entity linking probe (retrieval only, no LLM): for a MetaQA question file, variants of each
question (brackets kept, brackets removed, one seeded typo inside the topic, a made-up
entity in the topic slot), linked by `retrieval.seeds.text_seeds(fuzzy_link=True)` against
the store; reports per variant the share of questions whose links (or anchors) reach the
gold topic entity, the abstention ("not in the KG") rate and the link latency p50/p95, for each
threshold of a sweep. Tune the threshold on the VALIDATION split only.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/linking_probe.py .talent/exp2/val.txt
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from pathlib import Path

from benchio import retrieval_bench_setup, write_json_atomic

ROOT = retrieval_bench_setup()

from talent_core.evaluation.latency import percentile  # noqa: E402
from talent_core.questions import FORMAT_STOPWORDS, TOPIC  # noqa: E402
from talent_core.retrieval.linking import not_in_kg  # noqa: E402
from talent_core.retrieval.seeds import text_seeds  # noqa: E402
from talent_core.store import open_store  # noqa: E402
from talent_core.store.base import GraphReader  # noqa: E402
from talent_core.text import edit_distance, fold_name  # noqa: E402

THRESHOLDS = (0.6, 0.7, 0.75, 0.8, 0.85)
SYLLABLES = ["zor", "bax", "qui", "vel", "tran", "dro", "mek", "lis", "yth", "pol", "gra",
             "fen", "wub", "kol", "nir", "sab", "tev", "hux", "jor", "plen"]


def typo(name: str, rng: random.Random) -> str:
    """One insert, delete, substitute or swap of a letter inside ``name`` (seeded)."""
    spots = [i for i, c in enumerate(name) if c.isalpha()]
    i = rng.choice(spots)
    op = rng.choice(["insert", "delete", "substitute", "transpose"])
    letter = rng.choice(string.ascii_lowercase)
    if op == "insert":
        return name[:i] + letter + name[i:]
    if op == "delete" and len(spots) > 1:
        return name[:i] + name[i + 1:]
    if op == "transpose" and i + 1 < len(name) and name[i + 1].isalpha() and \
            name[i + 1].lower() != name[i].lower():
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    swap = rng.choice([c for c in string.ascii_lowercase if c != name[i].lower()])
    return name[:i] + (swap.upper() if name[i].isupper() else swap) + name[i + 1:]


def made_up(store: GraphReader, rng: random.Random, words: int) -> str:
    """A seeded invented name of ``words`` words (each >= 6 letters, so the fuzzy read
    allows two edits per word) more than two edits from every KG name the store's fuzzy
    read returns for it."""
    while True:
        name = " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
                        .capitalize() for _ in range(words))
        if any(len(w) < 6 for w in name.split()) or store.entities_by_name([name]):
            continue
        near = [*store.fuzzy_names(name, 200), *(
            e for w in name.split() for e in store.fuzzy_names(w, 200))]
        if all(edit_distance(fold_name(name), fold_name(e.name)) > 2 for e in near):
            return name


def variants(line: str, store: GraphReader, rng: random.Random) -> dict[str, tuple]:
    """variant -> (question text, topics or None, gold topic) for one question line."""
    text = line.split("\t")[0]
    topic = TOPIC.search(text).group(1)
    plain = TOPIC.sub(lambda m: m.group(1), text)
    t = topic
    for _ in range(20):  # a typo that is not itself a KG name
        t = typo(topic, rng)
        if not store.entities_by_name([t]):
            break
    fake = made_up(store, rng, max(1, min(2, len(topic.split()))))

    def put(name: str) -> str:
        return plain.replace(topic, name, 1)

    return {
        "brackets": (plain, [topic], topic),
        "no_brackets": (plain, None, topic),
        "typo": (put(t), [t], topic),
        "typo_no_brackets": (put(t), None, topic),
        "made_up": (put(fake), [fake], None),
        "made_up_no_brackets": (put(fake), None, None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path, help="MetaQA question file (the val split)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                    "linking_val.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    ap.add_argument("--extra-stopwords", nargs="*", default=[],
                    help="question words added to MetaQA's stopwords (an experiment)")
    args = ap.parse_args()
    if "test" in args.questions.name:
        sys.exit("linking_probe: the test split is held out; tune on the validation split")
    store = open_store()
    rng = random.Random(args.seed)
    lines = [ln for ln in args.questions.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.startswith("#")]
    items = [variants(ln, store, rng) for ln in lines]
    words = (*FORMAT_STOPWORDS["metaqa"], *args.extra_stopwords)
    gold = {}
    for v in items:
        t = v["brackets"][2]
        gold[t] = {e.id for e in store.entities_by_name([t])}
    out: dict = {"questions": str(args.questions), "n": len(items), "seed": args.seed,
                 "extra_stopwords": args.extra_stopwords,
                 "store": store.stats().model_dump(), "thresholds": {}, "examples": {}}
    for name in items[0]:
        out["examples"][name] = [list(v[name][:2]) for v in items[:3]]
    # exact behaviour: anchors with fuzzy linking on equal those with it off
    changed = 0
    for v in items:
        for key in ("brackets", "no_brackets"):
            q, topics, _ = v[key]
            off = text_seeds(q, store, topics, stopwords=words).anchor_ids
            on = text_seeds(q, store, topics, stopwords=words, fuzzy_link=True).anchor_ids
            changed += off != on
    out["exact_anchors_changed"] = changed
    for th in [None, *args.thresholds]:  # None: fuzzy linking off (exact names, today's)
        res: dict = {}
        for name in items[0]:
            reached = abstained = 0
            ms: list[float] = []
            for v in items:
                q, topics, topic = v[name]
                t0 = time.perf_counter()
                seeds = text_seeds(q, store, topics, stopwords=words, fuzzy_link=th is not None,
                                   link_threshold=th or 0.0)
                ms.append((time.perf_counter() - t0) * 1000)
                abstained += bool(not_in_kg(seeds.links))
                if topic is not None:  # the links' entities or (off: no links) the anchors
                    ids = {lk.id for lk in seeds.links if lk.linked} | set(seeds.anchor_ids)
                    reached += bool(ids & gold[topic])
            n = len(items)
            res[name] = {"reach_gold_topic": round(reached / n, 4) if name[:4] != "made"
                         else None, "abstained": round(abstained / n, 4),
                         "link_ms_p50": round(percentile(ms, 50), 2),
                         "link_ms_p95": round(percentile(ms, 95), 2)}
        out["thresholds"]["fuzzy_link off" if th is None else str(th)] = res
        print(th, {k: (r["reach_gold_topic"], r["abstained"]) for k, r in res.items()},
              flush=True)
    write_json_atomic(args.out, out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
