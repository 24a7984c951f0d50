"""Seeded, disjoint train / validation / test split of MetaQA dev questions, balanced over
hops (the question files of issue 8's experiment).

    python bench/metaqa_split.py --metaqa ../shared/data/metaqa --out .talent/exp \
        --train 400 --val 30 --test 100

Each hop's qa_dev.txt is shuffled with random.Random(hop); the first ``--train`` lines go
to train, the next ``--test`` to test, the next ``--val`` to validation (per hop). The split
is by line and no question text is in two parts (asserted). ``--extra N``: the next N lines
per hop go to ``train_extra.txt``, more training questions from the same split (the
generator's larger training set), disjoint from validation and test like the rest.
``--cover-types N``: MetaQA's question types (``qa_dev_qtype.txt``, line by line beside
``qa_dev.txt``) that train + train_extra hold fewer than N times get more questions of
their type from the lines no part took (in the same shuffled order) up to N, in
``train_types.txt`` (the relation-path planner's training: it can only plan path types it
was trained on; the 1,800-question draw had no 1-hop ``movie_to_imdbrating`` (24 of 9,992)
or ``movie_to_imdbvotes`` (8) question). The other files are unchanged by it.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path


def cover_types(
    raw: list[str], qtypes: Path, taken: list[str], rest: list[str], n: int
) -> list[str]:
    """Lines of `rest` (in order) for the question types `taken` holds fewer than n times;
    `raw`: qa_dev.txt's lines as read, which `qtypes` (qa_dev_qtype.txt) types line by line."""
    types = qtypes.read_text(encoding="utf-8").splitlines()
    if len(types) != len(raw):
        raise SystemExit(f"{qtypes}: {len(types)} lines, qa_dev.txt has {len(raw)}: not aligned")
    qtype = {ln: t for ln, t in zip(raw, types, strict=True) if ln.strip()}
    have = Counter(qtype[ln] for ln in taken)
    out = []
    for ln in rest:
        t = qtype[ln]
        if have[t] < n:
            have[t] += 1
            out.append(ln)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metaqa", type=Path, default=Path("../shared/data/metaqa"))
    ap.add_argument("--out", type=Path, default=Path(".talent/exp"))
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--val", type=int, default=30)
    ap.add_argument("--test", type=int, default=100)
    ap.add_argument("--extra", type=int, default=0)
    ap.add_argument("--cover-types", type=int, default=0, metavar="N")
    a = ap.parse_args()
    parts: dict[str, list[str]] = {"train": [], "test": [], "val": [], "train_extra": [],
                                   "train_types": []}  # fmt: skip
    for h in (1, 2, 3):
        src = a.metaqa / f"{h}-hop" / "qa_dev.txt"
        raw = src.read_text(encoding="utf-8").splitlines()
        lines = [ln for ln in raw if ln.strip()]
        random.Random(h).shuffle(lines)
        cut = [0, a.train, a.train + a.test, a.train + a.test + a.val]
        parts["train"] += lines[cut[0]:cut[1]]
        parts["test"] += lines[cut[1]:cut[2]]
        parts["val"] += lines[cut[2]:cut[3]]
        parts["train_extra"] += lines[cut[3]:cut[3] + a.extra]
        if a.cover_types:
            parts["train_types"] += cover_types(
                raw, src.with_name("qa_dev_qtype.txt"),
                lines[: cut[1]] + lines[cut[3]:cut[3] + a.extra],
                lines[cut[3] + a.extra:], a.cover_types)  # fmt: skip
    q = {k: {ln.split("\t")[0] for ln in v} for k, v in parts.items()}
    train = q["train"] | q["train_extra"] | q["train_types"]
    assert not (train & q["test"]) and not (q["val"] & q["test"]) and not (
        train & q["val"]), "a question is in two parts"
    a.out.mkdir(parents=True, exist_ok=True)
    for name, lines in parts.items():
        if (name == "train_extra" and not a.extra) or (name == "train_types" and not a.cover_types):
            continue
        (a.out / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{name}: {len(lines)} questions -> {a.out / (name + '.txt')}")


if __name__ == "__main__":
    main()
