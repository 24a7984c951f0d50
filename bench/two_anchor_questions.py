"""50 two-constraint questions built from the MetaQA KB, gold answers computed from it
(issue 45's two-anchor measurement; never trained on):

    python bench/two_anchor_questions.py ../shared/data/metaqa/kb.txt -o bench/metaqa_two_anchor.txt

Five kinds, 10 each (seed 0): films directed by [D] starring [A]; films written by [W]
starring [A]; films starring both [A1] and [A2]; films directed by [D] released in [Y];
films starring [A] in [L] (language). A pair qualifies when the films meeting both
constraints are a non-empty set smaller than each constraint's films (both constraints
matter) and every name is unique in the KB. Written in MetaQA's format, both topics in
[brackets]: `question<TAB>answer|answer`.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

KINDS = [
    ("directed_by", "starred_actors", "which films directed by [{0}] star [{1}]"),
    ("written_by", "starred_actors", "what movies written by [{0}] have [{1}] in the cast"),
    ("starred_actors", "starred_actors", "which films feature both [{0}] and [{1}]"),
    ("directed_by", "release_year", "which films by director [{0}] came out in [{1}]"),
    ("starred_actors", "in_language", "which movies with [{0}] are in [{1}]"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--per-kind", type=int, default=10)
    a = ap.parse_args()
    films: dict[tuple[str, str], set[str]] = defaultdict(set)  # (rel, object) -> films
    for line in a.kb.read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) != 3:
            continue
        film, rel, obj = parts
        films[(rel, obj)].add(film)
    casefold: dict[str, set[str]] = defaultdict(set)
    for (_, obj) in films:
        casefold[obj.casefold()].add(obj)
    for f in {f for s in films.values() for f in s}:
        casefold[f.casefold()].add(f)
    rng = random.Random(0)
    out = []
    by_rel: dict[str, list[str]] = defaultdict(list)
    for rel, obj in sorted(films):
        if len(casefold[obj.casefold()]) == 1 and len(films[(rel, obj)]) >= 2:
            by_rel[rel].append(obj)
    for r1, r2, template in KINDS:
        got = 0
        firsts = by_rel[r1][:]
        rng.shuffle(firsts)
        for x in firsts:
            if got >= a.per_kind:
                break
            candidates = [y for y in by_rel[r2] if y != x and films[(r1, x)] & films[(r2, y)]]
            rng.shuffle(candidates)
            for y in candidates:
                both = films[(r1, x)] & films[(r2, y)]
                if both < films[(r1, x)] and both < films[(r2, y)]:
                    out.append(template.format(x, y) + "\t" + "|".join(sorted(both)))
                    got += 1
                    break
    a.out.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(out)} questions -> {a.out}")


if __name__ == "__main__":
    main()
