"""An identifier-style copy of a MetaQA KB and its held-out questions (issue 45): every
entity name written as a DBpedia/YAGO-style identifier, so linking can be measured on names
as people type them against a KG that does not write them that way.

Styles: ``underscore`` (spaces -> "_", the rest kept: "J. P. Morgan Jr." ->
"J._P._Morgan_Jr."), ``slug`` (lower case, punctuation dropped, words joined by "_":
"j_p_morgan_jr"), ``none`` (names as they are: the same question forms for the original KG).
Writes ``OUT/kb.txt`` (``head|relation|tail``) and, from a question file
(``question<TAB>answers``, topic in [brackets]), ``OUT/bracketed.txt`` (the identifier inside
the brackets), ``OUT/plain.txt`` (brackets removed, the original human spelling) and
``OUT/typo.txt`` (plain with one seeded typo inside the topic), all with the gold answers in
identifier form.

    python bench/identifier_kg.py ../shared/data/metaqa/kb.txt .talent/exp2/test.txt \
        --out .talent/idkg
    TALENT_DATA_DIR=.talent/idkg/dd talent load .talent/idkg/kb.txt --format metaqa
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import string
from pathlib import Path

log = logging.getLogger("identifier_kg")

TOPIC = re.compile(r"\[([^\[\]]+)\]")
_NON_WORD = re.compile(r"[^\w]+")


def identifier(name: str, style: str = "underscore") -> str:
    """``name`` as an identifier: ``underscore`` "Tigres UANL" -> "Tigres_UANL"; ``slug``
    "J. P. Morgan Jr." -> "j_p_morgan_jr" (a name of punctuation only stays as it is)."""
    if style == "none":
        return name
    if style == "underscore":
        return "_".join(name.split())
    slug = "_".join(w for w in _NON_WORD.sub(" ", name.lower()).split())
    return slug or name


def convert_kb(src: Path, dst: Path, style: str) -> int:
    """Write ``src``'s triples to ``dst`` with both entity names as identifiers."""
    n = 0
    with src.open(encoding="utf-8") as f, dst.open("w", encoding="utf-8") as out:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3:
                continue
            h, r, t = parts
            out.write(f"{identifier(h, style)}|{r}|{identifier(t, style)}\n")
            n += 1
    return n


def typo(name: str, rng: random.Random) -> str:
    """``name`` with one letter (of a word of 4+ letters when it has one) deleted, doubled,
    replaced or swapped with the next (seeded)."""
    long = [m for m in re.finditer(r"[^\W\d_]{4,}", name)]
    spots = [i for m in long for i in range(m.start(), m.end())] or \
        [i for i, c in enumerate(name) if c.isalpha()]
    if not spots:
        return name
    i = rng.choice(spots)
    op = rng.choice(["delete", "double", "replace", "swap"])
    if op == "delete":
        return name[:i] + name[i + 1:]
    if op == "double":
        return name[:i] + name[i] + name[i:]
    if op == "swap" and i + 1 < len(name) and name[i + 1].isalpha() and \
            name[i + 1].lower() != name[i].lower():
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    new = rng.choice([c for c in string.ascii_lowercase if c != name[i].lower()])
    return name[:i] + (new.upper() if name[i].isupper() else new) + name[i + 1:]


def convert_questions(src: Path, out_dir: Path, style: str, seed: int = 0) -> int:
    """Write the bracketed, plain and typo forms of ``src``'s questions under ``out_dir``."""
    rng = random.Random(seed)
    bracketed, plain, typos = [], [], []
    for line in src.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        question, _, answers = line.partition("\t")
        gold = "|".join(identifier(a, style) for a in answers.split("|"))
        bracketed.append(TOPIC.sub(lambda m: f"[{identifier(m.group(1), style)}]", question)
                         + f"\t{gold}")
        plain.append(TOPIC.sub(lambda m: m.group(1), question) + f"\t{gold}")
        typos.append(TOPIC.sub(lambda m: typo(m.group(1), rng), question) + f"\t{gold}")
    for name, rows in (("bracketed", bracketed), ("plain", plain), ("typo", typos)):
        (out_dir / f"{name}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(plain)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb", type=Path, help="MetaQA kb.txt (head|relation|tail)")
    ap.add_argument("questions", type=Path, help="question file (question<TAB>answers)")
    ap.add_argument("--out", type=Path, default=Path(".talent/idkg"))
    ap.add_argument("--style", choices=("underscore", "slug", "none"), default="underscore")
    ap.add_argument("--seed", type=int, default=0, help="the typos' seed")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n = convert_kb(args.kb, args.out / "kb.txt", args.style)
    q = convert_questions(args.questions, args.out, args.style, args.seed)
    log.info("wrote %d triples and %d questions (%s) under %s", n, q, args.style, args.out)


if __name__ == "__main__":
    main()
