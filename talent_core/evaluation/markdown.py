"""report.md: the report's tables (readable on their own), its plots and the metric
definitions (`DEFINITIONS`, also in report.json). Text from the user's files and command is
escaped (`_md` / `_code`): it stays literal wherever report.md is rendered."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from talent_core.evaluation.methods import point_label

DEFINITIONS = """\
Names are matched after normalisation (`talent_core.text.answer_key`: Unicode NFKC,
lowercase, whitespace collapsed). Macro averages: plain means over questions.

Retrieval, for a predicted node set V (the method's nodes) and the gold answers V*:
- **Hit**: 1 if V and V* share a name. **Recall**: |V ∩ V*| / |V*|.
  **Precision**: |V ∩ V*| / |V|. **F1**: 2PR / (P + R). **mean nodes**: |V| (distinct names).
- **S**: the candidate subgraph (PCST); **V̂**: the LLM retriever's output (names of S plus
  out-of-candidate names); **V̂ ∩ S** / **V̂ \\ S**: its names inside / outside S
  (TaLenT Table 2). The node set of a method: S for retrieval methods and the no-retriever
  mode, the vector top-k for `vector`, V̂ for the LLM retriever (full, frozen).
- ExplaGraphs: V* is the pseudo-gold node set from `talent annotate-explagraphs`
  (`--annotations`); without it no retrieval metric is reported.

Answers (generated list A):
- **Hit@1**: the first non-empty answer of A is gold. **Hit@any**: some answer of A is gold.
- **substring hit** (G-Retriever's hit): some gold answer, lowercased with punctuation and
  the articles a/an/the removed, occurs in the generated text normalised alike (the raw
  output in free decoding; the answers joined by spaces in ranked decoding).
- **answer F1**: set F1 of A against the gold answers. **Accuracy** (ExplaGraphs, the
  label task): Hit@1 with the gold label (support / counter); **balanced**: the mean of the
  per-class accuracies (support, counter); **majority baseline**: always the most frequent
  gold label.

Out-of-candidate names (V̂ \\ S), TaLenT Appendix F:
- **per question**: mean number of out-of-candidate names; **grounded**: the share of them
  that name a KG entity (exact normalised match in the whole store).
- **hallucination rate** (eqs. 16-17): H = {} when Hit@1 = 1, else the names of V̂ \\ S that
  are not gold; rate = Σ|H| / Σ|V̂| over questions.

Latency: p50 / p95 / mean in ms per stage over the rows of a group (`retrieve_*`: candidate
retrieval, shared between the methods reading the same S; `retrieve_vector`: the vector
retriever's top-k; `retriever` / `generator`: the LLM stages; `total`: the row's path end to
end). Percentile q of n timings: the sorted timings' element at index min(n - 1, ⌊q/100 · n⌋).
Timings vary between runs; every other number is deterministic.
"""


def _stance_cells(g: dict[str, Any]) -> list[str]:
    """ExplaGraphs: accuracy, balanced accuracy, per-class accuracy (%) and the majority
    baseline (its label) of one group (`evaluation.stance.with_stance`)."""
    st = g.get("stance") or {}
    per = st.get("per_class", {})
    base = st.get("majority_baseline")
    return [_f(g["qa"]["hit@1"], True), _f(st.get("balanced_accuracy"), True),
            *(_f((per.get(k) or {}).get("accuracy"), True) for k in ("support", "counter")),
            f"{_f(base['accuracy'], True)} ({base['label']})" if base else "–"]


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isnan(x):
        return "–"
    if pct:
        return f"{100 * x:.1f}"
    return f"{x:.2f}" if isinstance(x, float) else str(x)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~$!&:])")


def _md(text: Any) -> str:
    """Text from the user's files and command (question types, hops, paths, sweep values)
    as literal Markdown on one line: the characters that make an image, a link, emphasis,
    HTML, math or a table cell are backslash-escaped (a type `![t](http://…)` must not
    become an image fetch where report.md is rendered)."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    return _MD_SPECIAL.sub(r"\\\1", text)


def _code(text: Any) -> str:
    """``text`` on one line as a Markdown code span (literal), fenced by more backticks than
    any run inside it."""
    text = "".join(c if c.isprintable() else " " for c in str(text))
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table, every cell through `_md` (categories come from the user's files)."""
    lines = ["| " + " | ".join(map(_md, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def markdown(report: dict[str, Any], plots: bool = True) -> str:
    """report.md: the tables (readable on their own) and, with ``plots``, the plots (pure).
    Text from the user's files and command goes through `_md`/`_code` (literal)."""
    res = report["results"]
    cfg = report["config"]
    ds = report["dataset"]
    out = ["# Evaluation report\n",
           f"{_code(report['command'])}\n" if report.get("command") else "",
           f"- questions: {ds['questions']} from "
           + ", ".join(f"{_code(f['path'])} (sha256 {_md(f['sha256'][:12])})"
                       for f in ds["files"])
           + f"; by hop: {_md(ds['questions_by_hop'])}; format {_md(cfg['format'])}",
           f"- store: {_md(ds['store'])}" if ds.get("store") else "- store: not used",
           f"- methods: {_md(', '.join(cfg['methods']))}; LLM modes: "
           f"{_md(', '.join(cfg['modes']))}; sweeps: "
           + (_md(", ".join(s["name"] + "=" + ",".join(map(str, s["values"]))
                            for s in cfg["sweeps"])) or "none"),
           f"- limit {cfg['limit']}, offset {cfg['offset']}, sample seed {cfg['sample_seed']}",
           f"- code: {_md(report['code']['commit'])}"
           + (" (uncommitted changes)" if report["code"].get("dirty") else ""),
           f"- machine: {_md(report['machine']['platform'])}, "
           f"{report['machine']['cpu_count']} CPUs, load {report['machine']['load_average']}",
           f"- rows: {report['run']['rows']} ({report['run']['resumed']} resumed from rows.jsonl)"
           "\n",
           "Percentages (×100) except mean nodes and latencies (ms). Rows are per method, "
           "LLM mode (`retrieval`: no language model) and sweep point.\n"]
    out.append("## Methods\n")
    out.append(_table(["method", "what", "modes"], [
        (n, m["description"], ", ".join(m["modes"])) for n, m in report["methods"].items()]))
    ret = [g for g in res if "retrieval" in g]
    if ret:
        out.append("## Retrieval: the node set of each method\n")
        out.append(_table(["method", "mode", "point", "n", "Hit", "Recall", "Precision", "F1",
                           "mean nodes"], [
            (g["method"], g["mode"], g["label"], g["n"], _f(g["retrieval"]["nodes"]["hit"], True),
             _f(g["retrieval"]["nodes"]["recall"], True),
             _f(g["retrieval"]["nodes"]["precision"], True),
             _f(g["retrieval"]["nodes"]["f1"], True), _f(g["retrieval"]["nodes"]["size"]))
            for g in ret]))
    t2 = [g for g in ret if "V̂" in g["retrieval"]]
    if t2:
        out.append("## S, V̂, V̂ ∩ S and V̂ \\ S (TaLenT Table 2)\n")
        rows = []
        for g in t2:
            for part in ("S", "V̂", "V̂∩S", "V̂\\S"):
                s = g["retrieval"].get(part)
                if s:
                    rows.append((g["method"], g["mode"], g["label"], part, _f(s["hit"], True),
                                 _f(s["recall"], True), _f(s["precision"], True),
                                 _f(s["f1"], True), _f(s["size"])))
        out.append(_table(["method", "mode", "point", "set", "Hit", "Recall", "Precision", "F1",
                           "mean nodes"], rows))
    qa = [g for g in res if "qa" in g]
    if qa:
        expla = cfg["format"] == "explagraphs"
        out.append("## Answers\n")
        head = ["method", "mode", "point", "n"] + (
            ["Accuracy", "balanced", "support", "counter", "majority baseline"] if expla else
            ["Hit@1", "Hit@any", "substring hit", "answer F1"])
        out.append(_table(head, [
            (g["method"], g["mode"], g["label"], g["n"],
             *(_stance_cells(g) if expla else
               [_f(g["qa"][k], True) for k in ("hit@1", "hit@any", "substring_hit",
                                                "answer_f1")]))
            for g in qa]))
    ooc = [g for g in res if "out_of_candidate" in g]
    if ooc:
        out.append("## Out-of-candidate names (Appendix F)\n")
        out.append(_table(["method", "mode", "point", "per question", "grounded %",
                           "hallucination rate %"], [
            (g["method"], g["mode"], g["label"], _f(g["out_of_candidate"]["per_question"]),
             _f(g["out_of_candidate"]["grounded"], True),
             _f(g["out_of_candidate"]["hallucination_rate"], True)) for g in ooc]))
    ref = report.get("reference_point", {})
    at_ref = [g for g in res if all(ref.get(k) == v for k, v in g["point"].items())]
    for key, title in (("by_hop", "hop"), ("by_type", "question type")):
        grp = [g for g in at_ref if key in g]
        if not grp:
            out.append(f"## Per {title}\n\nNot derivable for these questions"
                       + (" (MetaQA: a `*_qtype` file beside the questions gives the types)"
                          if key == "by_type" else " (no `N-hop` in the path, no qtype file, "
                          "no `hop` field)") + ".\n")
            continue
        what = "Hit@1 % where a generator answered, else retrieval Hit % (mean nodes)"
        out.append(f"## Per {title}\n\n{what}"
                   + (f", at {_md(point_label(ref))}" if ref else "") + ".\n")
        cats = sorted({c for g in grp for c in g[key]}, key=str)

        def cell(b: dict[str, Any] | None) -> str:
            if not b:
                return "–"
            if "hit@1" in b:
                return _f(b["hit@1"], True)
            return f"{_f(b.get('hit'), True)} ({_f(b.get('size'))})" if "hit" in b else "–"

        out.append(_table([title, "n"] + [series_name(g, ref) for g in grp], [
            (c, max(g[key].get(c, {}).get("n", 0) for g in grp),
             *[cell(g[key].get(c)) for g in grp]) for c in cats]))
    out.append("## Latency (ms)\n")
    out.append(_table(["method", "mode", "point", "stage", "p50", "p95", "mean"], [
        (g["method"], g["mode"], g["label"], stage, v["p50_ms"], v["p95_ms"], v["mean_ms"])
        for g in res for stage, v in g["latency"].items() if v]))
    if plots and report.get("plots"):
        out.append("## Plots\n")
        out += [f"![{p}]({p})\n" for p in report["plots"]]
    out.append("## Metric definitions\n")
    out.append(report["definitions"])
    return "\n".join(out)



def series_name(g: dict[str, Any], skip: Iterable[str] = ()) -> str:
    """"method (mode) [the point's settings but ``skip``]"."""
    skip = set(skip)
    rest = {k: v for k, v in g["point"].items() if k not in skip}
    name = g["method"] if g["mode"] == "retrieval" else f"{g['method']} ({g['mode']})"
    return name + (f" [{point_label(rest)}]" if rest else "")
