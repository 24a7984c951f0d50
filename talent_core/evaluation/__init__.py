"""Evaluation: metrics, latency summaries, question items, the runner (`talent eval` with or
without ``--report``), provenance, report.md and plots. One module per role:

* `metrics`: Hit / Recall / Precision / F1, answer metrics, hallucination count.
* `latency`: the one percentile and latency summary (reports and bench/ scripts).
* `datasets`: question files as report items (MetaQA, RoG, ExplaGraphs).
* `methods`: the report's methods (where a method is declared), modes, sweep projection.
* `sweep`: the report's options (`ReportOptions`, `--methods` / `--modes` / `--sweep`).
* `runner`: computes rows (one code path for `talent eval` and its reports).
* `summary`: macro averages and per-group results of rows.
* `provenance`: code commit, package versions, machine, hashes.
* `report`: `run_report` (rows file, resumption, report.json / report.md / plots).
* `markdown`, `plots`: report.md and the PNG plots (matplotlib imported lazily).
"""
