"""Follow-up questions measured on MetaQA's 2-hop held-out questions split into two turns.

    TALENT_DATA_DIR=.talent/b/metaqa OMP_NUM_THREADS=1 python bench/follow_up_eval.py \
        .talent/exp2/test.txt --metaqa ../shared/data/metaqa -o bench/results/follow_up.json

Each 2-hop question of the file (the held-out test part of bench/metaqa_split.py) is asked
as a conversation: turn 1 asks its first hop about the topic ("which movies did [X] act
in"), turn 2 its second hop with a pronoun ("who directed them?"), from templates per
MetaQA relation written here (the product's reading never sees them: it knows English
pronouns only). Gold of turn 2: the 2-hop question's own answers; turn 1's: the KB's
first-hop neighbours. Reported: turn 1 Hit@1, turn 2 Hit@1 and F1 (the follow-up read
against turn 1's own answers, as an analyst would meet it), whether the reading took the
first turn's answers (right for every template here), and the same 2-hop question asked
in one piece for comparison. MetaQA's 2-hop gold leaves out the topic itself ("which
movies share an actor with [X]" never lists X), the follow-up's planned path reaches it:
the `topic_in_answers` count says how often.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from talent_core.explore import turn_of
from talent_core.pipeline import Pipeline
from talent_core.questions import read_questions
from talent_core.text import answer_key

FIRST = {  # MetaQA's first hop -> turn 1 about [the topic]
    "actor_to_movie": "which movies did [{}] act in",
    "director_to_movie": "which movies did [{}] direct",
    "writer_to_movie": "which movies did [{}] write",
    "movie_to_actor": "who acted in [{}]",
    "movie_to_director": "who directed [{}]",
    "movie_to_writer": "who wrote [{}]",
}
SECOND = {  # MetaQA's second hop -> the follow-up
    "movie_to_year": "when were they released?",
    "movie_to_language": "what languages are they in?",
    "movie_to_genre": "what genres are they?",
    "movie_to_actor": "who acted in them?",
    "movie_to_director": "who directed them?",
    "movie_to_writer": "who wrote them?",
    "actor_to_movie": "which movies did they act in?",
    "director_to_movie": "which movies did they direct?",
    "writer_to_movie": "which movies did they write?",
}
KB_REL = {"actor": "starred_actors", "director": "directed_by", "writer": "written_by"}


def split_type(qtype: str) -> tuple[str, str]:
    a, b, c = qtype.split("_to_")
    return f"{a}_to_{b}", f"{b}_to_{c}"


def f1(pred: list[str], gold: set[str]) -> float:
    p = {answer_key(x) for x in pred}
    hit = len(p & gold)
    return 0.0 if not hit else 2 * hit / (len(p) + len(gold))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--metaqa", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--direct", action="store_true",
                    help="also ask each 2-hop question in one piece")
    ap.add_argument("--fresh", type=int, default=None, metavar="N",
                    help="instead of the file's 2-hop questions: N 2-hop dev questions drawn "
                    "(seed 46) from the lines no file of the file's split folder holds "
                    "(bench/metaqa_split.py's parts): questions nothing was tuned on")
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args()
    types = {}
    for hop in ("2-hop",):
        raw = (a.metaqa / hop / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
        qt = (a.metaqa / hop / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
        types.update({ln.split("\t")[0].strip(): t.strip() for ln, t in zip(raw, qt)})
    kb: dict[tuple[str, str], set[str]] = defaultdict(set)
    for line in (a.metaqa / "kb.txt").read_text(encoding="utf-8").splitlines():
        h, r, t = line.split("|", 2)
        kb[(h, r)].add(t)
        kb[(t, "~" + r)].add(h)
    load_start = os.getloadavg()
    pipe = Pipeline()
    rows = []
    questions, fresh_lines = a.questions, None
    if a.fresh:
        taken = {ln.split("\t")[0].strip() for f in a.questions.parent.glob("*.txt")
                 for ln in f.read_text(encoding="utf-8").splitlines()}
        dev = (a.metaqa / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
        pool = [i for i, ln in enumerate(dev, 1)
                if ln.strip() and ln.split("\t")[0].strip() not in taken]
        fresh_lines = sorted(random.Random(46).sample(pool, a.fresh))
        # the drawn lines, outside the repository (MetaQA's questions are not copied in)
        questions = Path(tempfile.mkdtemp()) / "fresh.txt"
        questions.write_text("\n".join(dev[i - 1] for i in fresh_lines) + "\n",
                             encoding="utf-8")
    lines = questions.read_text(encoding="utf-8").splitlines()
    recs = [(r, types[lines[i].split("\t")[0].strip()])
            for i, r in enumerate(read_questions(questions, "metaqa"))
            if lines[i].split("\t")[0].strip() in types]
    for rec, qtype in recs[: a.limit]:
        one, two = split_type(qtype)
        topic = rec.topic_entities[0]
        src, dst = one.split("_to_")
        rel = KB_REL[dst if src == "movie" else src]
        first_gold = kb[(topic, rel if src == "movie" else "~" + rel)]
        t = time.perf_counter()
        ans1 = pipe.ask(FIRST[one].format(topic))
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        ans2 = pipe.ask(SECOND[two], history=[turn_of(ans1)])
        t2 = time.perf_counter() - t
        gold = {answer_key(x) for x in rec.answers}
        reading = ans2.candidate.reading
        row = {
            "id": rec.id, "qtype": qtype, "topic": topic,
            "turn1": FIRST[one].format(topic), "turn2": SECOND[two],
            "hit1_turn1": bool(ans1.answer) and answer_key(ans1.answer[0]) in {
                answer_key(x) for x in first_gold},
            "hit1": bool(ans2.answer) and answer_key(ans2.answer[0]) in gold,
            "f1": round(f1(ans2.answer, gold), 4),
            "read_answers": reading is not None and reading.source == "answers",
            "reading": reading.text if reading else None,
            "topic_in_answers": answer_key(topic) in {answer_key(x) for x in ans2.answer},
            "answers": ans2.answer[:5], "n_answers": len(ans2.answer),
            "plan": [p.text for p in ans2.plan[:2]],
            "wall_s": [round(t1, 2), round(t2, 2)],
        }
        if a.direct:
            direct = pipe.ask(rec.question, rec.topic_entities)
            row["hit1_direct"] = bool(direct.answer) and answer_key(direct.answer[0]) in gold
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("qtype", "hit1", "f1", "reading")}), flush=True)
    n = len(rows)

    def mean(k: str) -> float | None:
        vals = [r[k] for r in rows if k in r]
        return round(sum(vals) / len(vals), 4) if vals else None

    by_type: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_type[r["qtype"]].append(r)
    walls = sorted(r["wall_s"][1] for r in rows)
    out = {
        "questions": str(a.questions), "n": n,
        "fresh_qa_dev_lines": fresh_lines,  # 2-hop/qa_dev.txt line numbers (--fresh)
        "turn1_hit1": mean("hit1_turn1"), "follow_up_hit1": mean("hit1"),
        "follow_up_f1": mean("f1"), "read_answers": mean("read_answers"),
        "topic_in_answers": mean("topic_in_answers"), "direct_hit1": mean("hit1_direct"),
        "follow_up_wall_s_p50": walls[n // 2] if n else None,
        "follow_up_wall_s_p95": walls[min(n - 1, int(0.95 * n))] if n else None,
        "by_type": {t: {"n": len(v), "hit1": round(sum(r["hit1"] for r in v) / len(v), 3)}
                    for t, v in sorted(by_type.items())},
        "machine": platform.processor() or platform.machine(),
        "load_avg_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "rows": rows,
    }
    a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k not in ("rows", "by_type")}))


if __name__ == "__main__":
    main()
