"""`RetrievalConfig`: every knob of candidate retrieval in one flat model, joined from the
shared settings (`settings.SharedSettings`) and each registered retriever's own settings
(`registry`), so a retriever's settings are CLI flags and override names like any other."""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from talent_core.errors import RetrievalSettingsError
from talent_core.retrieval import registry
from talent_core.retrieval.plugin import Control
from talent_core.retrieval.settings import MAX_HOPS, MIN_HOPS, SharedSettings, bounds
from talent_core.store.base import ExpansionCaps

__all__ = ["MAX_HOPS", "METHOD_FIELDS", "MIN_HOPS", "SIZE_FIELD", "Method", "RetrievalConfig",
           "RetrievalSettingsError", "apply_overrides", "field_bounds", "foreign_fields",
           "ui_controls"]

Method = Literal[registry.names()]  # type: ignore[valid-type]

# The settings' order before the registry (--help and messages list them so); a setting not
# named here (a new retriever's) follows in registry order.
_ORDER = ("k_nodes", "k_edges", "beam", "hops", "edge_cost", "prizes", "fanout", "hub_scan",
          "max_nodes", "max_edges", "path_frontier", "extend", "node_sim_share", "top_triples",
          "scorer", "ego_hops", "top_egos", "prune", "k_seed", "vector_anchors", "name_match",
          "fulltext_k", "stopwords")


def _same(a: FieldInfo, b: FieldInfo) -> bool:
    """Two retrievers may share a setting (vector and pcst: k_nodes) if they agree on it."""
    return (a.annotation, a.default, a.default_factory, repr(a.metadata)) == (
        b.annotation, b.default, b.default_factory, repr(b.metadata))


def _fields() -> dict[str, Any]:
    """method + the shared settings + every retriever's own, as create_model takes them."""
    found: dict[str, FieldInfo] = dict(SharedSettings.model_fields)
    for r in registry.retrievers():
        for name, info in r.settings.model_fields.items():
            if name == "method" or name in SharedSettings.model_fields:
                raise TypeError(f"retriever {r.name}: setting {name!r} is a shared one")
            if name in found and not _same(found[name], info):
                raise TypeError(f"retriever {r.name}: setting {name!r} differs from another "
                                "retriever's of that name")
            found.setdefault(name, info)  # the first retriever's description stays
    order = [n for n in _ORDER if n in found] + [n for n in found if n not in _ORDER]
    method = Field(registry.names()[0], description="retriever: " + "; ".join(
        f"{r.name} = {r.summary}" for r in registry.retrievers()))
    return {"method": (Method, method),
            **{n: (found[n].annotation, found[n]) for n in order}}


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def caps(self) -> ExpansionCaps:
        """The neighbourhood caps handed to the store's expansion."""
        return ExpansionCaps(fanout=self.fanout, max_nodes=self.max_nodes,  # type: ignore[attr-defined]
                             max_edges=self.max_edges, hub_scan=self.hub_scan)  # type: ignore[attr-defined]


RetrievalConfig = create_model(
    "RetrievalConfig", __base__=_Base, __module__=__name__,
    __doc__="Every knob of candidate retrieval: `method` (a registered retriever), the shared "
    "settings, every retriever's own (defaults: the paper's k_v = k_e = 10, c = 0.5).",
    **_fields(),
)

# The settings only one retriever reads (every other field is shared: seeds, hops, caps).
METHOD_FIELDS: dict[str, frozenset[str]] = {
    r.name: frozenset(r.settings.model_fields) for r in registry.retrievers()}
# The setting that sets each retriever's output size (coverage-vs-size curves sweep it).
SIZE_FIELD: dict[str, str] = {r.name: r.size for r in registry.retrievers()}


def foreign_fields(method: str) -> frozenset[str]:
    """The settings ``method`` does not read (another retriever's own)."""
    own = METHOD_FIELDS.get(method, frozenset())
    return frozenset().union(*METHOD_FIELDS.values()) - own


def field_bounds(name: str) -> tuple[float | None, float | None]:
    """(lower, upper) bound of a `RetrievalConfig` field from its constraints (None: open):
    what the CLI, the UI and the retrieval stages read."""
    return bounds(RetrievalConfig, name)


def ui_controls(method: str) -> list[Control]:
    """``method``'s UI controls with every blank filled from `RetrievalConfig` (bounds,
    choices, help); none declared: a slider of its size setting."""
    r = registry.get(method)
    defaults = RetrievalConfig()
    out = []
    for c in r.controls or (Control(r.size, r.size, (r.size,)),):
        field = RetrievalConfig.model_fields[c.sets[0]]
        default = getattr(defaults, c.sets[0])
        help_ = field.description if c.help is None else c.help
        if c.choice:
            options = c.options or tuple(str(a) for a in typing.get_args(field.annotation))
            out.append(Control(c.label, c.key, c.sets, options=options, help=help_,
                               choice=True))
            continue
        lo, hi = field_bounds(c.sets[0])
        lo = c.lo if c.lo is not None else int(lo if lo is not None else 0)
        hi = c.hi if c.hi is not None else int(hi if hi is not None else max(10 * default, 1))
        out.append(Control(c.label, c.key, c.sets, lo=lo, hi=hi, help=help_))
    return out


def apply_overrides(config: RetrievalConfig, **overrides: Any) -> RetrievalConfig:
    """`config` with `overrides` validated like a new RetrievalConfig (unknown keys and
    out-of-range values raise RetrievalSettingsError naming each field)."""
    if not overrides:
        return config
    try:
        return RetrievalConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field = ".".join(str(x) for x in err["loc"]) or "?"
            if err["type"] == "extra_forbidden":
                known = ", ".join(RetrievalConfig.model_fields)
                problems.append((field, f"unknown setting (known: {known})"))
            else:
                problems.append((field, f"{err['msg']} (got {err.get('input')!r})"))
        raise RetrievalSettingsError(problems) from None
