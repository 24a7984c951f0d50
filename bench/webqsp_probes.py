"""Issue 29 probes that decided what NOT to build (no language model unless said): on the
WebQSP-evidence KG's dev questions, with the rows of a default `talent eval --rows` run.

* ``constraints``: can the question's constraints pick among a planned path's ends? Entity
  constraints (a CVT on the top planned path linked to another entity the question names,
  e.g. the character in "who plays X in Y") and gender (father / daughter ...: do the
  ranked candidates have a `people.person.gender` fact?).
* ``mix``: the trained Freebase planner with the anchors' own types it was not trained on
  competing at log p = u, plus lambda x cos(question, path words) (the zero-shot score),
  top path hit chosen on one half of the questions (alternate ids) and measured on the
  other (cross-fitted), against the shipped planner alone; and a listwise logistic
  reranker of the same types over six features (`FEATURES`), cross-fitted the same way.
* ``int8``: dynamic int8 quantisation of the base model's linear layers (torch.ao): one
  prompt pass timed against float32 (interleaved, 1 thread), and the answers compared on
  ``--limit`` questions (the LM stages of a default ask).

    TALENT_DATA_DIR=.talent/b/webqsp python bench/webqsp_probes.py constraints \\
        --questions .talent/b/webqsp/questions/webqsp-evidence-dev.jsonl \\
        --rows 'runs/wq/default.*.jsonl' --out bench/results/webqsp_probes.json
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np

from talent_core.evaluation.datasets import read_items
from talent_core.evaluation.metrics import name_set
from talent_core.explore import is_cvt
from talent_core.pipeline import Pipeline
from talent_core.planning import ANCHOR_CAPS, type_similarity
from talent_core.retrieval.planner import anchor_types, plan_text, trained_types, walk
from talent_core.store.base import ExpansionCaps
from talent_core.text import normalise_name

MALE = {"father", "dad", "son", "sons", "brother", "brothers", "husband", "king", "boyfriend",
        "uncle", "nephew", "grandfather", "grandson"}
FEMALE = {"mother", "mom", "daughter", "daughters", "sister", "sisters", "wife", "queen",
          "girlfriend", "aunt", "niece", "grandmother", "granddaughter"}


def mentioned(name: str, question: str) -> bool:
    n = normalise_name(name)
    return len(n) >= 3 and re.search(
        r"(?<![a-z0-9])" + re.escape(n) + r"(?![a-z0-9])", question) is not None


def constraints(pipe: Pipeline, items: list, rows: dict[str, dict]) -> dict:
    """Entity constraints at the top planned path's CVTs; gender facts of the candidates."""
    caps = ExpansionCaps(fanout=50, max_nodes=200, max_edges=400)
    cvt_paths = with_match = gold_in_match = 0
    for it in items:
        cand = pipe.retrieve(it.rec.question, it.rec.topic_entities or None)
        plan = pipe.plan(cand)
        if not plan.paths or len(plan.paths[0].rels) < 2:
            continue
        rels, anchors = plan.paths[0].rels, set(cand.anchors)
        ends = plan.ends.get(next(iter(plan.ends)), set())
        if len(ends) < 2:
            continue
        cvt_paths += 1
        mids = {d for _, d in pipe.store.follow(sorted(anchors), rels[0], 2000)} - anchors
        q = normalise_name(it.rec.question)
        matched: set[str] = set()
        for m in mids:
            sub = pipe.store.neighbourhood([m], 1, caps)
            names = {n.id: n.name for n in sub.nodes}
            mine = {d for _, d in pipe.store.follow([m], rels[1], 2000)}
            others = {n for e in sub.edges for n in (e.src, e.dst)} - anchors - mine - {m}
            if any(mentioned(names.get(o, ""), q) for o in others if not is_cvt(names.get(o, ""))):
                matched |= mine & ends
        if matched and len(matched) < len(ends):
            with_match += 1
            got = [e.name for e in pipe.store.entities_by_id(sorted(matched))]
            gold_in_match += bool(name_set(got) & name_set(it.rec.answers))
    gendered = have = ranked = 0
    for r in rows.values():
        words = set(re.findall(r"[a-z]+", r["question"].lower()))
        if not words & (MALE | FEMALE) or "answer_ranked" not in r:
            continue
        gendered += 1
        for e in pipe.store.entities_by_name([c[0] for c in r["answer_ranked"][:6]]):
            ranked += 1
            have += bool(pipe.store.follow([e.id], "people.person.gender", 5))
    return {"top_path_through_a_cvt_with_several_ends": cvt_paths,
            "a_question_entity_at_the_cvt_narrows_the_ends": with_match,
            "gold_in_the_narrowed_ends": gold_in_match,
            "questions_with_a_gender_word": gendered,
            "ranked_candidates_with_a_gender_fact": f"{have} of {ranked}"}


def type_table(pipe: Pipeline, items: list) -> list[dict]:
    """Per question: the trained types that reach a node (log p, cos, gold hit) and the
    anchors' own types the planner does not know (cos, gold hit)."""
    planner, known = pipe.planner, pipe._planner[1]
    out = []
    for it in items:
        cand = pipe.retrieve(it.rec.question, it.rec.topic_entities or None)
        rec: dict = {"trained": [], "unknown": []}
        out.append(rec)
        if not cand.anchors or planner is None or planner.zero_shot:
            continue
        names = {s.id: s.name for s in cand.seeds}
        x = pipe.embedder.encode([plan_text(cand.question,
                                            [names.get(a, "") for a in cand.anchors])])[0]
        first = pipe.store.relations_at(cand.anchors)
        p, index = planner.probabilities(x), planner.path_index
        tt = trained_types(planner, p, first, known)[: planner.consider]
        sub = pipe.store.neighbourhood(cand.anchors, planner.anchor_hops, ANCHOR_CAPS)
        cvt = {n.id for n in sub.nodes if is_cvt(n.name)}
        own = (set(anchor_types(sub.edges, cand.anchors, planner.anchor_hops, cvt))
               | {(r,) for r in first}) - set(index)
        types = sorted(set(tt) | own)
        walked, _ = walk(pipe.store.follow, cand.anchors, types, limit=planner.walk_limit)
        named = {e.id: e.name for e in pipe.store.entities_by_id(
            sorted({n for e in walked.values() for n in e}))}
        sim = type_similarity(pipe.embedder, x, types)
        gold = name_set(it.rec.answers)
        for t in types:
            ends = [named.get(n, n) for n in walked.get(t, ()) if not is_cvt(named.get(n, n))]
            if ends:
                row = {"cos": sim[t], "hit": bool(name_set(ends) & gold), "len": len(t),
                       "ends": len(ends), "key": " > ".join(t)}
                if t in index:
                    rec["trained"].append({**row, "logp": math.log(max(float(p[index[t]]),
                                                                        1e-30))})
                else:
                    rec["unknown"].append(row)
    return out


def likeliest_unknown(rec: dict) -> list[dict]:
    """A question's 10 untrained types likeliest by cos (as the planner would walk them)."""
    return sorted(rec["unknown"], key=lambda r: (-r["cos"], r["len"], r["key"]))[:10]


def top_hit(rec: dict, lam: float, u: float | None) -> bool:
    """The top type under score = log p + lam cos (unknown types: u + lam cos, the 10
    likeliest by cos) reaches a gold answer."""
    cands = [(r["logp"] + lam * r["cos"], r) for r in rec["trained"]]
    if not cands:
        return False
    if u is not None:
        cands += [(u + lam * r["cos"], r) for r in likeliest_unknown(rec)]
    return min(cands, key=lambda c: (-c[0], c[1]["len"], c[1]["key"]))[1]["hit"]


def mix(pipe: Pipeline, items: list, table_out: Path | None) -> dict:
    table = type_table(pipe, items)
    if table_out:
        table_out.write_text(json.dumps(table) + "\n")
    grid = [(0.0, None)] + [(lam, u) for lam in (0, 1, 2, 5, 10, 20, 40)
                            for u in (None, -30, -20, -15, -12, -10, -8, -6, -4)]

    def hit(recs: list[dict], g: tuple) -> float:
        return round(float(np.mean([top_hit(r, *g) for r in recs])), 4)

    halves = {"A": table[0::2], "B": table[1::2]}
    out: dict = {"grid": "lambda in 0..40 x u in none, -30..-4", "cross_fit": {}}
    for fit, test in (("A", "B"), ("B", "A")):
        g = max(grid, key=lambda g: (hit(halves[fit], g), -g[0], -(g[1] or -99)))
        out["cross_fit"][f"{fit}->{test}"] = {
            "chosen": list(g), "top_path_hit": hit(halves[test], g),
            "shipped_planner": hit(halves[test], (0.0, None))}
    out["all_400_shipped_planner"] = hit(table, (0.0, None))
    out["reranker"] = rerank_cross_fit(halves["A"], halves["B"])
    out["known_type_reaches_gold"] = round(float(np.mean(
        [any(r["hit"] for r in t["trained"]) for t in table])), 4)
    return out


FEATURES = ("log p", "cos", "untrained type", "log ends", "one hop", "two hops")


def features(row: dict) -> list[float]:
    return [row.get("logp", 0.0), row["cos"], float("logp" not in row),
            math.log(row["ends"]), float(row["len"] == 1), float(row["len"] == 2)]


def candidates(rec: dict) -> list[tuple[list[float], bool]]:
    """The trained types that reach a node, then the 10 untrained types likeliest by cos."""
    if not rec["trained"]:
        return []
    return [(features(r), r["hit"]) for r in rec["trained"] + likeliest_unknown(rec)]


def fit_reranker(recs: list[dict], iters: int = 500, lr: float = 0.1, l2: float = 0.01
                 ) -> np.ndarray:
    """A listwise logistic model (softmax over a question's types, the gold-reaching ones
    the target) by gradient descent from the planner alone (w = [1, 0, ...])."""
    data = []
    for rec in recs:
        c = candidates(rec)
        if any(h for _, h in c):
            y = np.array([h for _, h in c], float)
            data.append((np.array([f for f, _ in c]), y / y.sum()))
    w = np.zeros(len(FEATURES))
    w[0] = 1.0
    for _ in range(iters):
        g = np.zeros_like(w)
        for x, t in data:
            s = x @ w
            p = np.exp(s - s.max())
            g += x.T @ (p / p.sum() - t)
        w -= lr * (g / len(data) + l2 * w * (np.arange(len(w)) > 0))
    return w


def rerank_hit(recs: list[dict], w: np.ndarray) -> float:
    hits = []
    for rec in recs:
        c = candidates(rec)
        hits.append(bool(c) and c[int(np.argmax(np.array([f for f, _ in c]) @ w))][1])
    return round(float(np.mean(hits)), 4)


def rerank_cross_fit(a: list[dict], b: list[dict]) -> dict:
    """The reranker fitted on one half, its top type's hit on the other."""
    out: dict = {"features": list(FEATURES)}
    for name, fit, test in (("A->B", a, b), ("B->A", b, a)):
        w = fit_reranker(fit)
        out[name] = {"weights": [round(float(v), 3) for v in w],
                     "top_path_hit": rerank_hit(test, w)}
    return out


def int8(pipe: Pipeline, items: list, limit: int) -> dict:
    import torch

    torch.set_num_threads(1)
    retriever, _ = pipe.models
    model = retriever.lm.model
    ids = torch.randint(100, 40000, (1, 430))

    def forward() -> float:
        with torch.inference_mode():
            t = time.perf_counter()
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
            return time.perf_counter() - t

    def answers() -> list[list[str]]:
        return [pipe.ask(it.rec.question, it.rec.topic_entities or None).answer[:1]
                for it in items[:limit]]

    forward()
    fp32 = [forward() for _ in range(5)]
    before = answers()
    linear = {n for n, m in model.named_modules()
              if isinstance(m, torch.nn.Linear) and "lora_" not in n and "lm_head" not in n}
    torch.ao.quantization.quantize_dynamic(model, linear, dtype=torch.qint8, inplace=True)
    forward()
    q8 = [forward() for _ in range(5)]
    after = answers()
    return {"prompt_pass_430_tokens_s": {"float32": round(statistics.median(fp32), 3),
                                         "int8": round(statistics.median(q8), 3)},
            "same_top_answer": f"{sum(a == b for a, b in zip(before, after))} of {len(before)}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe", choices=["constraints", "mix", "int8"])
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--rows", default="", help="glob of a default run's --rows files")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--table", type=Path, help="mix: write the per-question type table here")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    items = read_items([a.questions], "rog")
    rows = {r["id"]: r for f in sorted(glob.glob(a.rows)) for r in map(json.loads, open(f))}
    pipe = Pipeline()
    t0, before = time.time(), os.getloadavg()
    result = {"constraints": lambda: constraints(pipe, items, rows),
              "mix": lambda: mix(pipe, items, a.table),
              "int8": lambda: int8(pipe, items, a.limit)}[a.probe]()
    doc = json.loads(a.out.read_text()) if a.out.exists() else {"what": __doc__.split("\n\n")[0]}
    doc[a.probe] = {"command": "python bench/webqsp_probes.py " + a.probe, "questions": len(items),
                    **result, "seconds": round(time.time() - t0, 1),
                    "load_before_after": [before, os.getloadavg()]}
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    pipe.close()


if __name__ == "__main__":
    main()
