"""A fresh MetaQA validation draw for planner decisions (issue 45, stop 62): per hop, N
lines of qa_dev.txt that no part of the project's split holds and no earlier validation
draw holds, no question text twice.

    python bench/metaqa_validation_draw.py --exclude .talent/exp2/*.txt .talent/s57/xval.txt \
        -o .talent/s62/xval2.txt

Each hop's lines are drawn with random.Random(seed + hop). The held-out test part is among
the excluded files (`.talent/exp2/test.txt`), so a draw never holds a held-out question.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def question(line: str) -> str:
    return line.split("\t")[0].strip()


def draw(metaqa: Path, exclude: list[Path], per_hop: int, seed: int) -> list[str]:
    """``per_hop`` lines of each hop's qa_dev.txt whose question no file of ``exclude`` has."""
    taken = {question(ln) for f in exclude
             for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()}
    out: list[str] = []
    for hop in (1, 2, 3):
        lines = (metaqa / f"{hop}-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
        free = [ln for ln in lines if ln.strip() and question(ln) not in taken]
        if len(free) < per_hop:
            raise SystemExit(f"{hop}-hop: {len(free)} questions left, {per_hop} asked")
        out += random.Random(seed + hop).sample(free, per_hop)
    if len({question(ln) for ln in out}) != len(out):
        raise SystemExit("a question drawn twice: try another --seed")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metaqa", type=Path, default=Path("../shared/data/metaqa"))
    ap.add_argument("--exclude", type=Path, nargs="+", required=True,
                    help="question files whose questions the draw leaves out (the split's)")
    ap.add_argument("--per-hop", type=int, default=200)
    ap.add_argument("--seed", type=int, default=6200)
    ap.add_argument("-o", "--output", type=Path, required=True)
    a = ap.parse_args()
    if not any(p.name == "test.txt" for p in a.exclude):
        raise SystemExit("--exclude must name the split's test.txt (the held-out questions)")
    lines = draw(a.metaqa, a.exclude, a.per_hop, a.seed)
    a.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} questions -> {a.output}")


if __name__ == "__main__":
    main()
