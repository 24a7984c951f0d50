"""Which operator a question asks for, read from its words (pure rules; each rule is an
exact English construction, measured in bench/README "Operators").

* **count**: "how many X ...", "(what is) the number of X ...": the set, counted.
* **filter**: a comparator and a literal: "released after 2000", "before 1990", "since
  2005", "more than 3": the set, kept where a value of one relation compares true.
* **superlative**: "latest", "earliest", "oldest", "highest", ...: the set's members with
  the largest (or smallest) value of one relation.
* **compare**: two entities and a comparative: "which was released first, [X] or [Y]",
  "is X older than Y" (a value of each), "did [X] direct more films than [Y]" (a count of
  each); yes or no when the question starts with an auxiliary.
* **exists**: a yes/no question naming two entities: "did [X] star in [Y]".

A filter by an entity value ("comedies starring [X]") is two anchors meeting, which the
planner's joint plan answers; it is not an operator here. Words inside [brackets] (topic
entities) are never read as cues. `base` is the question without the operator's words:
what retrieval and the planner read.
"""

from __future__ import annotations

import re

from talent_core.models import Comparator, Operation

_NUM = r"(-?\d+(?:\.\d+)?(?:-\d{2}(?:-\d{2})?)?)"
_COUNT = re.compile(r"^\s*(?:(?:in |for |on |of )?how many|(?:what is |what's |give me |"
                    r"tell me )?(?:the )?(?:total )?number of|count(?: of| the| all)?)\s+",
                    re.I)
_FILTER = re.compile(r"\b(later than|earlier than|more than|less than|fewer than|at least|"
                     r"at most|after|before|since|until|prior to|over|under|above|below)"
                     r"\s+(?:the year\s+)?" + _NUM + r"(?![\w-])", re.I)
_COMPARATORS: dict[str, Comparator] = {
    "later than": "gt", "after": "gt", "more than": "gt", "over": "gt", "above": "gt",
    "earlier than": "lt", "before": "lt", "prior to": "lt", "less than": "lt",
    "fewer than": "lt", "under": "lt", "below": "lt", "since": "ge", "at least": "ge",
    "at most": "le", "until": "le"}
# the cue words that ask for the largest value; every other cue asks for the smallest
_MOST = ("most recent", "latest", "newest", "last", "youngest", "highest", "largest",
         "biggest", "longest", "greatest", "later", "newer", "younger", "more recent",
         "after", "higher", "larger", "bigger", "longer", "more")
_SUPERLATIVE = re.compile(r"\b(most recent|latest|newest|last|youngest|highest|largest|"
                          r"biggest|longest|greatest|earliest|oldest|first|lowest|smallest|"
                          r"shortest)\b", re.I)
_COMPARATIVE = re.compile(r"\b(more recent|most recent|first|earlier|earliest|sooner|before|"
                          r"older|oldest|later|latest|after|newer|newest|last|younger|"
                          r"youngest|higher|lower|larger|smaller|bigger|longer|shorter)\b",
                          re.I)
_MORE_THAN = re.compile(r"\b(more|fewer|less)\b", re.I)
_YES_NO = re.compile(r"^\s*(did|does|do|is|was|were|are|has|have|had)\b", re.I)
_AUX = {"did", "does", "do", "is", "was", "were", "are", "has", "have", "had", "been", "be",
        "that", "which", "who", "get", "got"}
_PREPOSITIONS = {"of", "by", "in", "on", "for", "with", "from", "to", "at", "as", "about"}
_BRACKETS = re.compile(r"\[[^\]]*\]")
_DO = re.compile(r"\b(did|does|do)\b", re.I)


def _masked(question: str) -> str:
    """The question with each [bracketed] span and each capitalised word after the first
    (a name's, as "First Blood" or "Tom Hanks") blanked to a bracket of the same length:
    cues never match inside an entity's name, and a filter's clause stops at one."""
    blank = _BRACKETS.sub(lambda m: "[" + " " * (len(m.group()) - 2) + "]", question)
    first = re.match(r"\s*\S+", blank)
    head = first.end() if first else 0
    return blank[:head] + re.sub(r"\b[A-Z][\w'.-]+",
                                 lambda m: "[" + " " * (len(m.group()) - 2) + "]",
                                 blank[head:])


def _cut(question: str, start: int, end: int) -> str:
    """The question without [start, end), spaces collapsed."""
    return " ".join((question[:start] + " " + question[end:]).split())


def _mentions(question: str) -> int:
    return len(_BRACKETS.findall(question))


def recognise(question: str) -> Operation | None:
    """The operator ``question`` asks for, or None: a plain one-path question. Compare and
    exists need two entities: a question that brackets its entities needs two brackets;
    unbracketed names are known only after linking, so those are read where the words fit
    and answered with a notice by `operators.apply` when linking finds fewer than two."""
    masked = _masked(question)
    asked = unbracketed(question)
    two = _mentions(question) != 1  # one [bracketed] entity: it names no second one
    yes_no = _YES_NO.match(masked) if two else None
    more = _MORE_THAN.search(masked) if two else None
    if more and re.search(r"\b(than|or)\b", masked[more.end():], re.I) \
            and not _FILTER.search(masked):
        word = more.group(1).lower()
        counted = _cut(question, more.start(), more.end())
        counted = re.sub(r"^\s*(who|which|what)\b|\b(than|or)\b|,", " ", counted, flags=re.I)
        return Operation(question=asked, op="compare", base=question, cue=word,
                         clause=" ".join(counted.split()), most=word == "more",
                         by_count=True, yes_no=yes_no is not None)
    count = _COUNT.match(masked)
    if count:
        rest = question[count.end():].strip()
        return Operation(question=asked, op="count", base="which " + rest,
                         cue=count.group().strip(), noun=counted_noun(rest))
    found = _FILTER.search(masked)
    if found:
        start = _clause_start(masked, found.start())
        clause = _clause(masked[start:found.start()])
        # "which movies did [X] direct after 1992": the verb after a do-question's subject
        # is the question's own ("did X direct"), kept in what is planned; a clause of its
        # own ("starring [X] were released after 2000") is not
        main_verb = (_DO.search(masked[:start]) is not None and clause
                     and masked[start:found.start()].split()[0].lower() not in _AUX)
        cut = found.start() if main_verb else start
        return Operation(question=asked, op="filter", base=_cut(question, cut, found.end()),
                         cue=found.group().strip(), clause=clause,
                         comparator=_COMPARATORS[found.group(1).lower()],
                         value=found.group(2))
    comparative = _COMPARATIVE.search(masked)
    if comparative and (yes_no or two and re.search(r"\b(or|than)\b", masked, re.I)):
        word = comparative.group(1).lower()
        return Operation(question=asked, op="compare", base=question, cue=word,
                         clause=_clause(masked[:comparative.start()]), most=word in _MOST,
                         yes_no=yes_no is not None)
    superlative = _SUPERLATIVE.search(masked)
    if superlative:
        word = superlative.group(1).lower()
        return Operation(question=asked, op="superlative",
                         base=_cut(question, superlative.start(), superlative.end()),
                         cue=word, clause=word, most=word in _MOST)
    if yes_no:  # two entities: known after linking (`operators.apply`)
        return Operation(question=asked, op="exists", base=question,
                         cue=yes_no.group(1).lower(), yes_no=True)
    return None


def counted_noun(rest: str) -> str:
    """What a count counts, as written after its cue: the noun phrase up to its plural
    ("record labels", "tourist attractions", "films"), stopping before an auxiliary, a
    preposition, a participle or a [bracket]; at most three words."""
    words: list[str] = []
    for w in rest.split()[:3]:
        low = w.strip("?,.!").lower()
        if w.startswith("[") or not low or low in _AUX or low in _PREPOSITIONS \
                or (words and low.endswith(("ed", "ing"))):
            break
        words.append(low)
        if low.endswith("s") and not low.endswith("ss"):
            break
    return " ".join(words)


def unbracketed(question: str) -> str:
    """``question`` without its topic brackets, spaces collapsed."""
    return " ".join(question.replace("[", "").replace("]", "").split())


def _clause_start(masked: str, at: int) -> int:
    """Where a filter's clause begins: up to three words before its comparator, stopping at
    a [bracket] or a comma ("starring [Tom Hanks] were released | after 2000")."""
    words = list(re.finditer(r"[^\s\[\],]+", masked[:at]))
    start = at
    for w in reversed(words[-3:]):
        gap = masked[w.end():start]
        if "]" in gap or "," in gap or "[" in gap:
            break
        start = w.start()
    return start


def _clause(text: str) -> str:
    """The words naming a relation, without auxiliaries and brackets."""
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", text) if w.lower() not in _AUX]
    return " ".join(words)
