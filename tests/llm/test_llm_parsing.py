from __future__ import annotations

import pytest

from talent_core.llm.parsing import (
    is_placeholder,
    match_selection,
    parse_label,
    parse_names,
    parse_selection,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("james cameron|titanic", ["james cameron", "titanic"]),
        ("James Cameron | Titanic ", ["james cameron", "titanic"]),
        ("a|b|james cameron|unknown|none|n/a|name1|Name2|", ["james cameron"]),
        ("titanic|titanic|TITANIC", ["titanic"]),
        ("Output: james cameron|titanic", ["james cameron", "titanic"]),
        ("Answer: james cameron", ["james cameron"]),
        ("Sure! Here are the nodes: james cameron|titanic", ["james cameron", "titanic"]),
        ("Sure! Here are the relevant nodes:\njames cameron|titanic\nHope this helps!",
         ["james cameron", "titanic"]),
        ("```\njames cameron|titanic\n```", ["james cameron", "titanic"]),
        ('"james cameron|titanic"', ["james cameron", "titanic"]),
        ('"james cameron"|"titanic"', ["james cameron", "titanic"]),
        ("[james cameron|titanic]", ["james cameron", "titanic"]),
        ("star wars: a new hope|george lucas", ["star wars: a new hope", "george lucas"]),
        ("'til death|james  cameron", ["'til death", "james cameron"]),
        ("washington d.c.|united states", ["washington d.c.", "united states"]),
        ("james cameron", ["james cameron"]),
        ("james cameron</s>", ["james cameron"]),
        ("james cameron|titanic<|im_end|>\nmore", ["james cameron", "titanic"]),
        ("", []),
        ("   \n\n", []),
        ("Sure!", []),
        ("Here are the nodes:", []),
        ("- james cameron\n- titanic\n- unknown", ["james cameron", "titanic"]),
        ("1. james cameron\n2. titanic", ["james cameron", "titanic"]),
        ("the matrix (1999)|keanu reeves", ["the matrix (1999)", "keanu reeves"]),
        ("||", []),
        ("sure thing|okja", ["sure thing", "okja"]),
        ("Okay, james cameron|titanic", ["james cameron", "titanic"]),
        ("Sure here are the nodes: titanic|avatar", ["titanic", "avatar"]),
    ],
)
def test_parse_names(raw: str, expected: list[str]) -> None:
    assert parse_names(raw) == expected


def test_truncated_drops_partial_last_item() -> None:
    assert parse_names("james cameron|titanic|leonardo dica", truncated=True) == [
        "james cameron", "titanic"]
    # complete output keeps it
    assert parse_names("james cameron|titanic|leonardo dica") == [
        "james cameron", "titanic", "leonardo dica"]
    # a trailing separator shows the last item was complete
    assert parse_names("james cameron|titanic|", truncated=True) == ["james cameron", "titanic"]
    # the cut fell in chatter after the list: the list line is complete
    assert parse_names("james cameron|titanic\nI chose these bec", truncated=True) == [
        "james cameron", "titanic"]


def test_placeholders() -> None:
    for p in ("A", "b", "unknown", "None", "n/a", "name1", "name 3", "", "  ", "..."):
        assert is_placeholder(p), p
    for ok in ("1997", "avatar", "a beautiful mind", "na1x"):
        assert not is_placeholder(ok), ok


def test_match_selection_maps_names_to_nodes(candidate) -> None:
    found_calls: list[list[str]] = []

    def lookup(names: list[str]) -> dict[str, str]:
        found_calls.append(names)
        return {"berlin": "kg:berlin"}

    sel = match_selection(["james cameron", "TITANIC", "berlin", "atlantis"], candidate, lookup,
                          raw="x")
    assert [n.id for n in sel.selected] == ["p:cameron", "m:titanic"]
    assert [(o.name, o.grounded, o.id) for o in sel.out_of_candidate] == [
        ("berlin", True, "kg:berlin"), ("atlantis", False, None)]
    assert found_calls == [["berlin", "atlantis"]]  # only out-of-S names are looked up
    assert sel.names == ["james cameron", "TITANIC", "berlin", "atlantis"]


def test_match_selection_lookup_shapes(candidate) -> None:
    class Ent:
        def __init__(self, id: str) -> None:
            self.id = id

    sel = match_selection(["rome", "paris", "oslo"], candidate,
                          lambda names: {"rome": [Ent("kg:rome")], "Paris": Ent("kg:paris"),
                                         "oslo": []})
    got = {o.name: (o.grounded, o.id) for o in sel.out_of_candidate}
    assert got == {"rome": (True, "kg:rome"), "paris": (True, "kg:paris"), "oslo": (False, None)}


def test_trailing_period_falls_back(candidate) -> None:
    sel = parse_selection("avatar.|english", candidate)
    assert {n.id for n in sel.selected} == {"m:avatar", "l:en"}


def test_duplicate_names_in_s_select_both(candidate) -> None:
    from talent_core.models import CandidateNode

    candidate.nodes.append(CandidateNode(id="m:titanic-1953", name="Titanic"))
    sel = parse_selection("titanic", candidate)
    assert [n.id for n in sel.selected] == ["m:titanic", "m:titanic-1953"]


def test_parse_selection_without_lookup(candidate) -> None:
    sel = parse_selection("Output: james cameron|mars", candidate, truncated=False)
    assert [n.name for n in sel.selected] == ["James Cameron"]
    assert sel.out_of_candidate[0].grounded is False
    assert sel.raw == "Output: james cameron|mars"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("support", ["support"]), ("Counter.", ["counter"]), ("I think they support each other",
     ["support"]), ("counter, not support", ["counter"]), ("maybe", [])],
)
def test_parse_label(raw: str, expected: list[str]) -> None:
    assert parse_label(raw) == expected
