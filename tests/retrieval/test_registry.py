"""The retriever registry (talent_core/retrieval/registry.py): every plug-in module found,
RetrievalConfig joined from the shared settings and the plug-ins' own, and what the CLI, the
UI and the report read from it."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pydantic import BaseModel, Field

from talent_core.retrieval import registry
from talent_core.retrieval.config import (
    METHOD_FIELDS,
    SIZE_FIELD,
    Method,
    RetrievalConfig,
    _fields,
    field_bounds,
    foreign_fields,
    ui_controls,
)
from talent_core.retrieval.plugin import Retriever
from talent_core.retrieval.settings import SharedSettings, bounds


def test_every_retriever_module_is_registered_in_menu_order():
    names = registry.names()
    assert names[:4] == ("pcst", "subgraphrag", "grag", "vector")  # pcst first: the default
    assert typing.get_args(Method) == names
    assert RetrievalConfig().method == "pcst"
    with pytest.raises(KeyError, match="registered: pcst, subgraphrag"):
        registry.get("nope")


def test_config_is_the_shared_settings_plus_every_retrievers_own():
    fields = set(RetrievalConfig.model_fields)
    assert fields == {"method", *SharedSettings.model_fields,
                      *(f for r in registry.retrievers() for f in r.settings.model_fields)}
    # the order before the registry (error messages and --help list them so)
    assert list(RetrievalConfig.model_fields)[:8] == [
        "method", "k_nodes", "k_edges", "beam", "hops", "edge_cost", "prizes", "fanout"]
    for r in registry.retrievers():
        assert METHOD_FIELDS[r.name] == set(r.settings.model_fields)
        assert SIZE_FIELD[r.name] == r.size
        for name, own in r.settings.model_fields.items():
            assert field_bounds(name) == bounds(r.settings, name)
            assert RetrievalConfig.model_fields[name].get_default() == own.get_default()
    assert foreign_fields("grag") >= {"k_nodes", "top_triples"}
    assert not foreign_fields("grag") & {"ego_hops", "top_egos", "prune", "hops"}
    assert "k_nodes" not in foreign_fields("vector")  # shared by pcst and vector


def test_a_setting_two_retrievers_declare_differently_is_refused(monkeypatch):
    class Clash(BaseModel):
        k_nodes: int = Field(99, ge=0)

    clash = Retriever("clash", Clash, "k_nodes", lambda ctx: None, "a clash")  # type: ignore
    monkeypatch.setitem(registry._registry(), "clash", clash)
    with pytest.raises(TypeError, match="k_nodes.*differs"):
        _fields()

    class Shared(BaseModel):
        hops: int = 2

    monkeypatch.setitem(registry._registry(), "clash",
                        dataclasses.replace(clash, settings=Shared, size="hops"))
    with pytest.raises(TypeError, match="hops.*shared"):
        _fields()


def test_a_retrievers_size_must_be_one_of_its_settings():
    class Own(BaseModel):
        n: int = 1

    with pytest.raises(TypeError, match="size setting 'm'"):
        Retriever("x", Own, "m", lambda ctx: None, "x")  # type: ignore


def test_ui_controls_fill_bounds_choices_and_help_from_the_config(monkeypatch):
    pcst = ui_controls("pcst")
    assert [(c.key, c.lo, c.hi) for c in pcst if not c.choice] == [("k", 1, 20)]
    prizes = next(c for c in pcst if c.choice)
    assert prizes.options == ("default", "paper") and prizes.sets == ("prizes",)
    grag = {c.key: c for c in ui_controls("grag")}
    assert (grag["ego_hops"].lo, grag["ego_hops"].hi) == (1, field_bounds("ego_hops")[1])
    assert grag["top_egos"].help == RetrievalConfig.model_fields["top_egos"].description
    # no controls declared: a slider of the size setting within its bounds
    bare = dataclasses.replace(registry.get("grag"), controls=())
    monkeypatch.setitem(registry._registry(), "grag", bare)
    [only] = ui_controls("grag")
    assert only.sets == ("top_egos",) and only.lo == 1 and only.hi >= 10


def test_report_methods_come_from_the_retrievers():
    specs = {m.name: m for m in registry.report_methods()}
    assert dict(specs["pcst-paper"].overrides) == {"method": "pcst", "prizes": "paper"}
    assert dict(specs["grag"].overrides) == {"method": "grag"}
    assert specs["subgraphrag"].retriever == "subgraphrag"
    assert {"subgraphrag", "grag"} <= set(registry.llm_report_retrievers())
    assert "pcst" not in registry.llm_report_retrievers()  # llm-ranked / llm-free read pcst
