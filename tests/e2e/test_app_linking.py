"""Entity linking in the UI (AppTest, the toy MetaQA KG): a typo'd name is read as the KG's
entity and said so; an absent one gets "not in the KG", no answer, and its closest names
as buttons that ask again; Explore lists the typo'd name's entity first."""

from __future__ import annotations

from test_app_pages import _app, _ok, _texts, ask, explore


def test_ask_reads_a_typo_as_the_kg_name(use_toy):
    at = ask(_app(), "who directed [Gravty]", "retrieval")
    _ok(at)
    info = [i.value for i in at.info if "Reading" in i.value]
    assert info and "Gravty" in info[0] and "Gravity" in info[0], info
    assert "Alfonso Cuarón" in set(at.dataframe[0].value["name"])
    assert not [w.value for w in at.warning if "not in the KG" in w.value]


def test_ask_abstains_on_an_absent_entity_and_reasks_with_a_closest_name(use_toy, tmp_path,
                                                                          monkeypatch):
    from tiny_llm import tiny_llama

    from talent_core.config import get_settings

    monkeypatch.setenv("TALENT_BASE_MODEL", str(tiny_llama(tmp_path / "tiny")))
    get_settings.cache_clear()
    at = ask(_app(), "who directed [Grbvty]", "full")  # two edits in one word: no link
    _ok(at)
    warn = [w.value for w in at.warning if "not in the KG" in w.value]
    assert warn and "Grbvty" in warn[0], warn
    assert "Answer:" not in _texts(at) and "answers:" not in _texts(at)  # no bold guess
    gravity = [b for b in at.button if b.key and b.key.startswith("closest")
               and b.label == "Gravity"]
    assert gravity, [b.label for b in at.button]
    gravity[0].click()
    at.run()
    _ok(at)
    assert at.text_input(key="question").value == "who directed [Gravity]"
    assert "Answer:" in _texts(at) or "answers:" in _texts(at)
    assert not [w.value for w in at.warning if "not in the KG" in w.value]


def test_explore_lists_the_typoed_name_first(use_toy):
    at = explore("keanu reevs")
    _ok(at)
    pick = at.selectbox(key="explore_pick")
    assert pick.value == 0
    assert pick.options[0].startswith("Keanu Reeves") and "fuzzy" in pick.options[0], \
        pick.options[:3]


def test_explore_says_not_in_the_kg_and_opens_nothing_by_itself(use_toy):
    """A name no entity has and none is close enough to read as: "not in the KG" as Ask
    says it, the closest names offered to pick, no neighbourhood opened unasked."""
    at = explore("Matrix Reloaded")
    _ok(at)
    warn = [w.value for w in at.warning if "not in the KG" in w.value]
    assert warn and "Matrix Reloaded" in warn[0], [w.value for w in at.warning]
    pick = at.selectbox(key="explore_pick")
    assert pick.value is None and any(o.startswith("The Matrix") for o in pick.options)
    assert not at.dataframe  # nothing opened
    pick.set_value(0)
    at.run()
    _ok(at)
    assert at.dataframe, "a picked name opens"
