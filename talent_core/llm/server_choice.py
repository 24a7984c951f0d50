"""Ranking without log-probabilities (Ollama, most hosted APIs): the model chooses among the
numbered candidates, and its choice is turned into scores `ranking.select_top` reads (pure;
`server.ServerLM.score` sends the requests).

* **structured output**: one chat request, the role's system and user turns plus the
  numbered candidate names, and a JSON schema whose only values are the candidates' numbers
  (``{"answers": [3, 1]}``, best first). Sent in the OpenAI form (``response_format`` of
  type ``json_schema``: OpenAI, vLLM, Ollama); where a server refuses it, in llama.cpp's
  form (``json_object`` with a ``schema``); where it refuses both, with none.
* **free text, grounded**: a reply that is not such JSON is read as the model's answer line
  (`parsing.parse_names`) and each item matched to a candidate name (exactly, else the
  closest spelling), as ``--decode free`` grounds its answers in the KG.

Scores: the chosen names 0, -0.01, -0.02 ... in the model's order (all within any margin);
the others far below (CHOICE_GAP apart, so that when the model chose nothing only the
first candidate is kept, never the whole list).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

from talent_core.llm.parsing import parse_names
from talent_core.llm.ranking import Scored
from talent_core.text import answer_key

ASK = ("\n\nCandidates:\n{items}\n\nReply with the numbers of the candidates that answer, "
       "best first, as JSON: {{\"answers\": [numbers]}}.")
UNCHOSEN = -1000.0  # the score of the first name the model did not choose
CHOICE_GAP = 10.0  # apart from each other: more than any margin, so only one is kept
FORMATS = ("json_schema", "json_object", "none")  # tried in this order (module doc)
_CUT = re.compile(r'\s*\{\s*"answers"\s*:\s*\[([\d,\s]*)$')


def max_tokens(n: int) -> int:
    """Room for choosing all ``n`` numbers (a few tokens each), within reason."""
    return min(16 + 4 * n, 512)


def schema(n: int) -> dict[str, Any]:
    """The JSON schema of a choice among ``n`` numbered candidates."""
    return {"type": "object", "additionalProperties": False, "required": ["answers"],
            "properties": {"answers": {"type": "array", "minItems": 1, "maxItems": n,
                                       "items": {"type": "integer",
                                                 "enum": list(range(1, n + 1))}}}}


def messages(system: str, user: str) -> list[dict[str, str]]:
    """A role's system and user turns as chat messages."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def choice_body(system: str, user: str, names: Sequence[str], fmt: str) -> dict[str, Any]:
    """The chat request (without the model) asking to choose among ``names`` (``fmt``: one
    of FORMATS)."""
    items = "\n".join(f"{i}. {n}" for i, n in enumerate(names, 1))
    body: dict[str, Any] = {"messages": messages(system, user + ASK.format(items=items)),
                            "max_tokens": max_tokens(len(names)), "temperature": 0.0}
    if fmt == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "answers", "schema": schema(len(names))}}
    elif fmt == "json_object":
        body["response_format"] = {"type": "json_object", "schema": schema(len(names))}
    return body


def read_choice(content: str, names: Sequence[str]) -> tuple[list[str], bool]:
    """(the chosen names in the model's order, whether it was the schema's JSON); a reply
    that is not is grounded as free text (module doc)."""
    try:
        reply = json.loads(content)
        numbers = reply["answers"] if isinstance(reply, dict) else None
    except (ValueError, KeyError):
        cut = _CUT.match(content)  # the schema's JSON cut off by max_tokens
        numbers = [int(x) for x in re.findall(r"\d+", cut.group(1))] if cut else None
    if isinstance(numbers, list) and all(isinstance(x, int) for x in numbers):
        chosen = [names[x - 1] for x in numbers if 1 <= x <= len(names)]
        return list(dict.fromkeys(chosen)), True
    return ground(content, names), False


def ground(text: str, names: Sequence[str]) -> list[str]:
    """The candidates a free-text answer names: each item of its answer line matched to a
    name exactly (`text.answer_key`: case, spacing, Unicode forms aside), else to the
    closest spelling (ratio >= 0.85), else, when the item is a number in the candidates'
    range, to that candidate."""
    keys = {answer_key(n): n for n in names}
    chosen: list[str] = []
    for item in parse_names(text):
        key = answer_key(item)
        name = keys.get(key)
        if name is None:
            close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.85)
            name = keys[close[0]] if close else None
        if name is None and key.rstrip(".").isdigit() and 1 <= int(key.rstrip(".")) <= len(names):
            name = names[int(key.rstrip(".")) - 1]
        if name is not None and name not in chosen:
            chosen.append(name)
    return chosen


def choice_scores(names: Sequence[str], chosen: Sequence[str]) -> list[Scored]:
    """Scores for ``names`` from the model's choice (module doc)."""
    first = {n: i for i, n in enumerate(chosen)}
    rest = iter(range(len(names)))
    return [Scored(n, -0.01 * first[n]) if n in first
            else Scored(n, UNCHOSEN - CHOICE_GAP * next(rest)) for n in names]
