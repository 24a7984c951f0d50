"""Follow-up questions: a question that refers to the previous turn ("who directed them?",
"and his wife?", "when was it released?") is read with the previous answers or the
previous topic as its anchors.

Referring words are English pronouns (and a question-final "that" / "this"); their number
decides between the previous answers and the previous topic where it can (plural "them"
after 32 films reads the films; singular "it" after them reads the one topic), and the
planner's score decides where both agree ("when was it released" after "who directed
Inception": Inception has a release year, Christopher Nolan has none). Pure functions;
`Pipeline.retrieve_planned` supplies the score. Where the question names its own entity in
[brackets], it is not read as a follow-up.

A follow-up may also be the previous question about something else ("what about
[Titanic]?", "how about Heat?", "and Alien?"): `rephrase` writes the previous question
with the new mention in place of its topic (or of its referring word), and that question
is asked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from talent_core.models import Entity, Reading, Turn

PLURAL = ("them", "they", "their", "theirs", "those", "these", "themselves")
SINGULAR = ("it", "its", "itself", "he", "him", "his", "himself", "she", "her", "hers",
            "herself")
_WORD = re.compile(r"(?<![\w'’-])(" + "|".join(PLURAL + SINGULAR) + r")(?![\w-])",
                   re.IGNORECASE)
_FINAL = re.compile(r"(?<![\w'’-])(that|this)\s*[?.!]*\s*$", re.IGNORECASE)
FOLLOW_UP_MAX = 100  # previous entities a follow-up's anchors hold at most (first ones kept)
HISTORY = 3  # turns a follow-up may refer back to
PERSONAL = ("he", "him", "his", "himself", "she", "her", "hers", "herself")
IMPERSONAL = ("it", "its", "itself")
_WHO = re.compile(r"^\W*(who|whom|whose)\b", re.IGNORECASE)  # its answers are people
_VALUE = re.compile(r"^[\s\d.,:/+-]+$")  # a number or a date: never "he" or "she"

_ABOUT = re.compile(r"^\s*(?:(?:and|so)\s+)?(?:what|how)\s+about\s+(?P<a>.+?)[\s?.!]*$"
                    r"|^\s*and\s+(?P<b>[^?]+?)\s*\?\s*$", re.IGNORECASE)

_QUESTION_WORD = re.compile(r"(who|whom|whose|what|which|when|where|why|how|did|does|do|is|"
                            r"are|was|were|can|could|has|have|had|will|would)\b", re.IGNORECASE)
MENTION_WORDS = 8  # "what about X?": X is a mention, not a sentence

Score = Callable[[list[str]], float]  # anchors' ids -> how well the question plans from them


def referring_words(question: str) -> tuple[str, bool] | None:
    """(the first referring word as typed, whether it is plural), or None."""
    m = _WORD.search(question) or _FINAL.search(question)
    if m is None:
        return None
    word = m.group(1)
    return word, word.lower() in PLURAL


def without_words(question: str, word: str) -> str:
    """``question`` without the referring word ``word`` (whole words only): what the
    planner reads, as it reads a question without its mentions."""
    pattern = r"(?<![\w'’-])" + re.escape(word) + r"(?![\w-])"
    out = re.sub(r"\s+", " ", re.sub(pattern, " ", question, flags=re.IGNORECASE)).strip()
    return out or question


def readings(word: str, plural: bool, history: Sequence[Turn], limit: int = FOLLOW_UP_MAX
             ) -> list[Reading]:
    """The readings of ``word`` in the last `HISTORY` turns of ``history`` (oldest first):
    those whose number agrees first, then the latest turn before older ones and its answers
    before its topic (the likelier referent of a reply). A personal pronoun ("he", "her")
    never reads as values (numbers, dates)."""
    out: dict[tuple[str, ...], Reading] = {}
    for turn in reversed(history[-HISTORY:]):
        for source, entities in (("answers", turn.answers), ("topic", turn.topic)):
            ids = tuple(sorted({e.id for e in entities}))
            people = source == "answers" and bool(_WHO.match(turn.question))
            if ids in out:  # read the latest way, a person if any turn says so
                out[ids].people |= people
                continue
            if not ids or word.lower() in PERSONAL and all(_VALUE.match(e.name)
                                                            for e in entities):
                continue
            unique = list({e.id: e for e in entities}.values())
            out[ids] = Reading(words=word, source=source, entities=unique[:limit],
                               total=len(unique), people=people)
    return sorted(out.values(), key=lambda r: r.plural != plural)


def _agreeing(word: str, plural: bool, options: list[Reading]) -> list[Reading]:
    """The readings that agree with ``word`` in number, then in person: "he" / "she" (and a
    "they" with no plural to refer to: singular they) read as people (the answers of a
    who-question) and "it" as anything else, where any such reading exists."""
    agree = [r for r in options if r.plural == plural]
    w = word.lower()
    if plural and not agree:  # "they" for one: singular they, said of a person
        options = [r for r in options if r.people] or options
    else:
        options = agree or options
    if w in PERSONAL:
        options = [r for r in options if r.people] or options
    elif w in IMPERSONAL:
        options = [r for r in options if not r.people] or options
    return options


def read_follow_up(question: str, history: Sequence[Turn], score: Score | None = None,
                   limit: int = FOLLOW_UP_MAX) -> Reading | None:
    """How ``question`` refers to the turns of ``history`` (oldest first; None: it does
    not, or there is none). Of the readings that agree with the referring word in number
    and person (`_agreeing`), the one ``score`` rates highest; a tie, or no score, keeps
    the first (`readings`)."""
    ref = referring_words(question) if history else None
    if ref is None:
        return None
    options = readings(*ref, history, limit)
    if not options:
        return None
    agreeing = _agreeing(*ref, options)
    if score is None or len(agreeing) == 1:
        return agreeing[0]
    scores = [score([e.id for e in r.entities]) for r in agreeing]
    return agreeing[max(range(len(agreeing)), key=lambda i: (scores[i], -i))]


def rephrase(question: str, history: Sequence[Turn]) -> str | None:
    """The previous question about the new mention of ``question`` ("what about X?", "how
    about X?", "and X?"): X in place of the previous turn's topic as it was written there
    (brackets kept or not, as X was typed), else of its referring word; None when
    ``question`` is not such a follow-up or the previous question names neither."""
    m = _ABOUT.match(question) if history else None
    if m is None:
        return None
    new = (m.group("a") or m.group("b") or "").strip()
    if (not new or referring_words(new) is not None  # "what about them?": not a new topic
            or len(new.split()) > MENTION_WORDS
            or m.group("b") and _QUESTION_WORD.match(new)):  # "and who wrote Heat?"
        return None
    last = history[-1]
    bare = new.strip("[]").strip()
    for e in sorted(last.topic, key=lambda e: -len(e.name)):
        name = re.escape(e.name)
        hit = re.search(r"\[\s*" + name + r"\s*\]|(?<![\w'’-])" + name + r"(?![\w-])",
                        last.question, re.IGNORECASE)
        if hit:
            typed = new if new.startswith("[") or not hit.group(0).startswith("[") else f"[{bare}]"
            return last.question[:hit.start()] + typed + last.question[hit.end():]
    ref = referring_words(last.question)
    if ref is None:
        return None
    pattern = r"(?<![\w'’-])" + re.escape(ref[0]) + r"(?![\w-])"
    return re.sub(pattern, new.replace("\\", "\\\\"), last.question, count=1)


def known_turns(history: Sequence[Turn], entities_by_id: Callable[[list[str]], list[Entity]]
                ) -> list[Turn]:
    """The last `HISTORY` turns of ``history`` with their entities read again from the KG
    (one lookup): an id the KG does not hold is dropped, every name is the KG's (a history
    comes from a client; what it names is never taken on trust)."""
    history = list(history[-HISTORY:])
    ids = list(dict.fromkeys(e.id for t in history for e in [*t.topic, *t.answers]))
    known = {e.id: e for e in entities_by_id(ids)} if ids else {}
    return [t.model_copy(update={
        "topic": [known[e.id] for e in t.topic if e.id in known],
        "answers": [known[e.id] for e in t.answers if e.id in known]}) for t in history]
