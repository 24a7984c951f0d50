"""Latency the graph soft prompt adds to one answer: embedding the context's names and
relations, and the GNN + projector forward, timed separately on real contexts (MetaQA
held-out candidates with the trained retriever's cached selections).

    python bench/graph_prompt_latency.py .talent/exp/test_h3.jsonl \
        --selections bench/results/graph_prompt/metaqa.selections.jsonl \
        --adapter runs/graph-prompt/both --out bench/results/graph_prompt_latency.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import torch  # noqa: E402
from benchio import load_average, write_json_atomic  # noqa: E402

from talent_core.config import get_settings  # noqa: E402
from talent_core.embedding import get_embedder  # noqa: E402
from talent_core.evaluation.latency import percentile  # noqa: E402
from talent_core.llm import graph_prompt as gp  # noqa: E402
from talent_core.llm.data import read_examples  # noqa: E402
from talent_core.models import Selection  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    """`talent_core.evaluation.latency.percentile` at q (0-1), 2 places."""
    return round(percentile(xs, 100 * q) or 0.0, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", type=Path)
    ap.add_argument("--selections", type=Path, required=True)
    ap.add_argument("--adapter", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--store", action="store_true",
                    help="also read the stored vectors from the configured store "
                    "(TALENT_DATA_DIR): what `talent ask --generator-type graph-prompt` does")
    args = ap.parse_args()
    s = get_settings()
    examples = read_examples(args.examples)[: args.limit]
    sels = [Selection.model_validate(json.loads(line)["selection"])
            for line in args.selections.read_text().splitlines()][: args.limit]
    module = gp.load(args.adapter)
    graphs = [gp.prompt_graph(ex.candidate, sel) for ex, sel in zip(examples, sels, strict=True)]
    out: dict = {"examples": str(args.examples), "n": len(graphs),
                 "torch_threads": torch.get_num_threads(),
                 "nodes_mean": round(statistics.fmean(len(g.nodes) for g in graphs), 1),
                 "edges_mean": round(statistics.fmean(len(g.edges) for g in graphs), 1),
                 "graph_parameters": sum(p.numel() for p in module.parameters())}
    store = None
    if args.store:
        from talent_core.store import open_store

        store = open_store(s)
    ways = [("numpy", None), ("sentence-transformers", None)] + (
        [("store+numpy", store)] if store is not None else [])
    for way, source in ways:
        emb = get_embedder(s.embedding_model, "cpu", s.embed_batch_size,
                           backend=way.removeprefix("store+"))
        gp.graph_tensors(graphs[0], emb.encode, source)  # warm-up
        embed_ms, gnn_ms = [], []
        for g in graphs:
            t0 = time.perf_counter()
            x, ei, ea = gp.graph_tensors(g, emb.encode, source)
            t1 = time.perf_counter()
            with torch.inference_mode():
                module(x, ei, ea)
            t2 = time.perf_counter()
            embed_ms.append((t1 - t0) * 1000)
            gnn_ms.append((t2 - t1) * 1000)
        out[way] = {"embed_ms_p50": pct(embed_ms, 0.5), "embed_ms_p95": pct(embed_ms, 0.95),
                        "gnn_ms_p50": pct(gnn_ms, 0.5), "gnn_ms_p95": pct(gnn_ms, 0.95)}
    if store is not None:
        store.close()
    out["load_average"] = load_average()
    write_json_atomic(args.out, out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
