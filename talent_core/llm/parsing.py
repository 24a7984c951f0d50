"""Parsing the retriever's / generator's one-line ``name1|name2|...`` output. Pure.

Policy (what the parser does with imperfect output):

* Special-token text (``</s>``, ``<|im_end|>``, ``[/INST]``...) and Markdown fences are removed.
* Line choice: the first line that contains ``|`` (after removing labels); without one, a
  bullet / numbered list of two or more items is read as the names; otherwise the first line
  that is not chatter ("Sure! Here are the nodes:").
* Labels and chatter in front of the list are dropped: ``Output:``, ``Answer:``,
  ``Sure! Here they are: ...``. A colon is only treated as a label when the words in front of
  it are label/chatter words, so names such as ``star wars: a new hope`` survive.
* Items: split on ``|``, strip spaces, quotes and bullets, lowercase, collapse whitespace,
  drop empties and placeholders (a/b/c, unknown, none, n/a, name1...), de-duplicate by
  normalised form, first occurrence wins.
* Truncation: when generation stopped at ``max_new_tokens`` (``truncated=True``) and the cut
  fell inside the chosen line, the last item is dropped, since it may be a partial name
  (``james cam``). A complete last item is lost too; we prefer a missing node to a wrong
  one. Output that ended normally keeps every item.

Matching (`match_selection`): a parsed name selects every node of S whose normalised name
equals it (S may hold two nodes with one name; they cannot be told apart from text). A name
that matches no node of S is out-of-candidate: it is looked up in the whole KG through the
``lookup`` callback (the store's entities_by_name), which gives ``grounded`` and the KG id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from talent_core.models import Candidate, CandidateNode, OutOfCandidate, Selection
from talent_core.text import answer_key  # the comparison key: NFKC, casefold, spaces

__all__ = ["answer_key", "match_selection", "parse_label", "parse_names", "parse_selection"]

Lookup = Callable[[list[str]], Mapping[str, Any]]

_WS = re.compile(r"\s+")
_SPECIAL = re.compile(
    r"<\|[^|<>]{1,40}\|>|</?s>|\[/?INST\]|<</?SYS>>|<unk>|<pad>|<eos>|<bos>|<end_of_turn>"
)
_FENCE = re.compile(r"^\s*```[\w-]*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_LABEL_WORDS = re.compile(
    r"^(?:[\s!.,]*(?:sure|okay|ok|certainly|of course|here|is|are|the|my|final|output|"
    r"outputs|answer|answers|selected|selection|relevant|retrieved|candidate|node|nodes|"
    r"entity|entities|name|names|result|results|list|line|they|it|following|reply|"
    r"response)[\s!.,]*)+$",
    re.IGNORECASE,
)
_CHATTER_PREFIX = re.compile(  # "Sure! ...", "Okay, ..." (punctuation required: "sure thing")
    r"^(?:sure|okay|ok|certainly|of course|absolutely)[!.,]+\s*", re.IGNORECASE
)
_CHATTER_LINE = re.compile(
    r"^(?:sure|okay|ok|certainly|of course|absolutely|here (?:is|are)|i (?:think|would|will|"
    r"have|can)|the (?:answer|answers|nodes|entities|relevant) )\b|:\s*$",
    re.IGNORECASE,
)
_NAME_N = re.compile(r"^(?:name|node|entity|answer)\s*\d*$")
PLACEHOLDERS = frozenset(
    {"a", "b", "c", "d", "a/b/c", "unknown", "none", "n/a", "na", "null", "nil", "nothing",
     "...", "…", "etc", "etc.", "?", "-", "tbd", "placeholder"}
)


def unquote(s: str) -> str:
    """Remove ONE pair of quotes or brackets wrapping the whole string (``"x"``, ``[x]``);
    a lone apostrophe (``'til death``) is part of the name and stays."""
    s = s.strip()
    pairs = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "[": "]", "(": ")"}
    if len(s) >= 2 and pairs.get(s[0]) == s[-1]:
        inner = s[1:-1].strip()
        if s[0] not in inner and s[-1] not in inner:  # not '"a"|"b"' nor '(a) b (c)'
            return inner
    return s


def clean_name(name: str) -> str:
    """A name as it appears in a prompt or target line: lowercase, one line, no ``|``."""
    s = name.replace("|", " ").lower()
    return _WS.sub(" ", s).strip()


def is_placeholder(name: str) -> bool:
    key = answer_key(name)
    return not key or key in PLACEHOLDERS or bool(_NAME_N.match(key))


def _strip_label(line: str) -> str:
    """Remove ``Output:``-style labels and leading chatter from a candidate line."""
    s = _CHATTER_PREFIX.sub("", line.strip())
    first_pipe = s.find("|")
    head = s if first_pipe < 0 else s[:first_pipe]
    colon = head.rfind(":")
    if colon >= 0 and _LABEL_WORDS.match(head[:colon] or "x"):
        s = s[colon + 1 :]
    elif colon == 0:
        s = s[1:]
    return unquote(s)  # a whole list wrapped in quotes or brackets


def _split_items(line: str) -> list[str]:
    out = []
    for item in line.split("|"):
        item = _BULLET.sub("", item)
        item = unquote(_WS.sub(" ", item)).lower()
        out.append(item)
    return out


def parse_names(raw: str, truncated: bool = False) -> list[str]:
    """Names in a model's output line (see the module docstring for the policy)."""
    text = _SPECIAL.sub("", raw or "")
    lines = [ln for ln in text.splitlines() if ln.strip() and not _FENCE.match(ln)]
    if not lines:
        return []
    chosen: int | None = None
    for i, ln in enumerate(lines):
        if "|" in _strip_label(ln):
            chosen = i
            break
    items: list[str]
    if chosen is None:
        bullets = [ln for ln in lines if _BULLET.match(ln)]
        if len(bullets) >= 2:
            items = [_split_items(b)[0] for b in bullets]
            if truncated and lines[-1] is bullets[-1]:
                items = items[:-1]
            return _finish(items)
        for i, ln in enumerate(lines):
            if not _CHATTER_LINE.search(ln.strip()) or _strip_label(ln) != ln.strip():
                chosen = i
                break
        if chosen is None:
            return []
    line = _strip_label(lines[chosen])
    items = _split_items(line)
    if truncated and chosen == len(lines) - 1 and items and not line.rstrip().endswith("|"):
        items = items[:-1]
    return _finish(items)


def _finish(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        key = answer_key(item)
        if is_placeholder(key) or key in seen:
            continue
        seen.add(key)
        out.append(key)
    return out


def _variants(key: str) -> list[str]:
    """Fallback keys for a name not found as written: a trailing sentence period removed."""
    v = key.rstrip(".").rstrip()
    return [v] if v and v != key else []


def _lookup_id(found: Any) -> str | None:
    """The KG id from whatever the lookup returned for a name (id, Entity, list of them)."""
    if found is None:
        return None
    if isinstance(found, list | tuple):
        found = found[0] if found else None
        if found is None:
            return None
    if isinstance(found, str):
        return found
    return str(getattr(found, "id", found))


def match_selection(
    names: Sequence[str],
    candidate: Candidate,
    lookup: Lookup | None = None,
    raw: str = "",
    truncated: bool = False,
) -> Selection:
    """Map parsed names to nodes of S; the rest become out-of-candidate nodes, grounded
    against the KG with ``lookup`` (None: nothing is grounded)."""
    index: dict[str, list[CandidateNode]] = {}
    for node in candidate.nodes:
        index.setdefault(answer_key(node.name), []).append(node)
    selected: list[CandidateNode] = []
    chosen_ids: set[str] = set()
    outside: list[str] = []
    for name in names:
        key = answer_key(name)
        hits = index.get(key)
        if hits is None:
            hits = next((index[v] for v in _variants(key) if v in index), None)
        if hits is None:
            outside.append(key)
            continue
        for node in hits:
            if node.id not in chosen_ids:
                chosen_ids.add(node.id)
                selected.append(node)
    found: Mapping[str, Any] = lookup(list(outside)) if (lookup and outside) else {}
    found_norm = {answer_key(k): v for k, v in found.items()}
    ooc = []
    for name in outside:
        hit = found.get(name, found_norm.get(name))
        kg_id = _lookup_id(hit)
        kg_name = getattr(hit, "name", None)
        ooc.append(OutOfCandidate(name=name, grounded=kg_id is not None, id=kg_id,
                                  kg_name=kg_name if isinstance(kg_name, str) else None))
    return Selection(
        raw=raw, names=list(names), selected=selected, out_of_candidate=ooc, truncated=truncated
    )


def parse_selection(
    raw: str, candidate: Candidate, lookup: Lookup | None = None, truncated: bool = False
) -> Selection:
    """`parse_names` then `match_selection`."""
    return match_selection(parse_names(raw, truncated), candidate, lookup, raw, truncated)


def parse_label(raw: str, labels: Sequence[str] = ("support", "counter")) -> list[str]:
    """Label task: the first allowed label mentioned in the output ([] when none is)."""
    text = _SPECIAL.sub("", raw or "").lower()
    hits = [(m.start(), lab) for lab in labels for m in [re.search(rf"\b{re.escape(lab)}", text)]
            if m]
    return [min(hits)[1]] if hits else []
