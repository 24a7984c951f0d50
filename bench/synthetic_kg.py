"""Generate a synthetic movie KG in MetaQA format (`head|relation|tail`), for latency
benchmarks at scale (>= 2M triples).

Shape: MetaQA's nine relations; popularity is Zipf-like so there are hubs (genres, years,
languages, popular actors) as in real KGs. Names are unique strings ("Movie 123", "Actor
45"). Deterministic for a seed. Writes questions in MetaQA format next to it, with answers
computed from the generated graph (1/2/3-hop templates).

    python bench/synthetic_kg.py --triples 2000000 --out .talent/bench/synth
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np


def zipf_choice(rng: np.random.Generator, n: int, size: int, a: float = 1.1) -> np.ndarray:
    ranks = np.arange(1, n + 1, dtype=np.float64)
    p = ranks ** (-a)
    p /= p.sum()
    return rng.choice(n, size=size, p=p)


def generate(n_triples: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    per_movie = 9.5
    n_movies = int(n_triples / per_movie)
    pools = {
        "directed_by": ("Director", max(1000, n_movies // 8)),
        "written_by": ("Writer", max(1000, n_movies // 6)),
        "starred_actors": ("Actor", max(2000, n_movies // 2)),
        "release_year": ("Year", 110),
        "in_language": ("Language", 60),
        "has_genre": ("Genre", 25),
        "has_tags": ("Tag", 8000),
        "has_imdb_rating": ("Rating", 90),
        "has_imdb_votes": ("Votes", 3),
    }
    counts = {  # edges per movie: (low, high) inclusive
        "directed_by": (1, 1), "written_by": (1, 2), "starred_actors": (2, 3),
        "release_year": (1, 1), "in_language": (0, 1), "has_genre": (1, 2),
        "has_tags": (0, 2), "has_imdb_rating": (0, 1), "has_imdb_votes": (0, 1),
    }
    triples: list[tuple[str, str, str]] = []
    for rel, (label, pool) in pools.items():
        lo, hi = counts[rel]
        k = rng.integers(lo, hi + 1, size=n_movies)
        total = int(k.sum())
        tails = zipf_choice(rng, pool, total, a=0.9 if pool > 1000 else 1.05)
        heads = np.repeat(np.arange(n_movies), k)
        for h, t in zip(heads.tolist(), tails.tolist()):
            tail = str(1900 + t) if label == "Year" else f"{label} {t}"
            triples.append((f"Movie {h}", rel, tail))
    uniq = list(dict.fromkeys(triples))
    rng.shuffle(uniq)
    return uniq[:n_triples]


def questions(triples, seed: int = 0, n: int = 300):
    """MetaQA-style 1/2/3-hop questions with answers computed from the graph."""
    rng = np.random.default_rng(seed + 1)
    out_edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    in_edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for h, r, t in triples:
        out_edges[(h, r)].append(t)
        in_edges[(t, r)].append(h)
    actors = sorted({t for (t, r) in in_edges if r == "starred_actors"})
    movies = sorted({h for (h, r) in out_edges if r == "directed_by"})
    qs = {1: [], 2: [], 3: []}
    for m in rng.choice(movies, size=n, replace=False):
        qs[1].append((f"who directed [{m}]", out_edges[(m, "directed_by")]))
    for a in rng.choice(actors, size=n, replace=False):
        ms = in_edges[(a, "starred_actors")]
        ans = sorted({d for m in ms for d in out_edges[(m, "directed_by")]})
        qs[2].append((f"who directed the movies starred by [{a}]", ans))
        ans3 = sorted({
            g for m in ms for d in out_edges[(m, "directed_by")]
            for m2 in in_edges[(d, "directed_by")] for g in out_edges[(m2, "has_genre")]
        })
        qs[3].append((f"what genres are the movies directed by the director of the films "
                      f"starred by [{a}]", ans3))
    return qs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(".talent/bench/synth"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    triples = generate(args.triples, args.seed)
    with (args.out / "kb.txt").open("w", encoding="utf-8") as f:
        for h, r, t in triples:
            f.write(f"{h}|{r}|{t}\n")
    for hop, qs in questions(triples, args.seed).items():
        with (args.out / f"qa_{hop}hop.txt").open("w", encoding="utf-8") as f:
            for q, ans in qs:
                f.write(f"{q}\t{'|'.join(ans)}\n")
    ents = {h for h, _, _ in triples} | {t for _, _, t in triples}
    print(f"{len(triples)} triples, {len(ents)} entities -> {args.out}")


if __name__ == "__main__":
    main()
