"""The words of MetaQA's question templates (the question less its [topic]) found in at
least ``--min`` TRAINING questions and not yet stopwords: candidates for the metaqa entry
of `talent_core.questions.FORMAT_STOPWORDS` (one-word spans never linked as names).
Training files only: the held-out list is never read.

    python bench/template_words.py .talent/exp2/train.txt .talent/exp2/train_extra.txt \
        .talent/exp2/train_types.txt
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from talent_core.questions import FORMAT_STOPWORDS, TOPIC  # noqa: E402
from talent_core.retrieval.seeds import STOPWORDS  # noqa: E402


def template_words(files: list[Path], least: int) -> list[tuple[str, int]]:
    """(word, training questions whose template holds it), most frequent first."""
    counts: collections.Counter[str] = collections.Counter()
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                text = TOPIC.sub(" ", line.split("\t")[0]).lower()
                counts.update(set(re.findall(r"[a-z']+", text)))
    known = set(FORMAT_STOPWORDS["metaqa"]) | set(STOPWORDS)
    return [(w, c) for w, c in counts.most_common() if c >= least and w not in known]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--min", type=int, default=3)
    args = ap.parse_args()
    for word, n in template_words(args.files, args.min):
        print(f"{word}\t{n}")


if __name__ == "__main__":
    main()
