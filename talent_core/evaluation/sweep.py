"""The report's options, validated: `--methods`, `--modes`, `--sweep` (k, lambda or any
RetrievalConfig field) and the sweep points they span (`ReportOptions.parse`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talent_core.errors import RetrievalSettingsError, TalentError
from talent_core.evaluation.methods import (
    DEFAULT_METHODS,
    LLM_MODES,
    METHODS,
    REPORT_FORMATS,
    Point,
)
from talent_core.retrieval.config import RetrievalConfig, apply_overrides


class ReportError(TalentError, ValueError):
    """A bad report option (the CLI exits with code 2 and this message)."""


@dataclass
class Sweep:
    name: str  # "k", "lambda" or a RetrievalConfig field
    values: list[Any]
    dirs: dict[str, str] = field(default_factory=dict)  # lambda -> retriever adapter dir


def parse_list(spec: str | None, what: str) -> list[str]:
    items = [x.strip() for x in (spec or "").split(",") if x.strip()]
    if spec is not None and not items:
        raise ReportError(f"{what}: empty list")
    return list(dict.fromkeys(items))


def parse_methods(spec: str | None, fmt: str) -> list[str]:
    names = parse_list(spec, "--methods") or DEFAULT_METHODS[fmt]
    for n in names:
        if n not in METHODS:
            raise ReportError(f"--methods: unknown method {n!r} (known: {', '.join(METHODS)})")
        if fmt not in METHODS[n].formats:
            ok = [m for m, x in METHODS.items() if fmt in x.formats]
            raise ReportError(f"--methods: {n!r} does not apply to --format {fmt} "
                              f"(methods for {fmt}: {', '.join(ok)})")
    return names


def parse_modes(spec: str | None, methods: Sequence[str]) -> list[str]:
    modes = parse_list(spec, "--modes") or ["full"]
    for m in modes:
        if m not in LLM_MODES:
            raise ReportError(f"--modes: unknown mode {m!r} (known: {', '.join(LLM_MODES)})")
    if spec is not None and not any(METHODS[m].llm for m in methods):
        raise ReportError("--modes applies to the LLM methods (llm-ranked, llm-free); "
                          "--methods has none")
    return modes


def _number(text: str, what: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ReportError(f"{what}: {text!r} is not a number") from None


def parse_sweep(spec: str, base: RetrievalConfig) -> Sweep:
    """``k=3,5,10`` | ``lambda=0.001:DIR,0.01:DIR`` | ``FIELD=v1,v2`` (a RetrievalConfig
    field, each value validated as that field)."""
    name, eq, rest = spec.partition("=")
    name = name.strip().replace("-", "_")
    where = f"--sweep {spec!r}"
    if not eq or not name or not rest.strip():
        raise ReportError(f"{where}: expected NAME=v1,v2,... (k=3,5,10; lambda=0.001:DIR,...;"
                          " or a retrieval setting such as edge_cost=0.25,0.5)")
    parts = [p.strip() for p in rest.split(",") if p.strip()]
    if name == "k":
        values = [_number(p, where) for p in parts]
        if any(not isinstance(v, int) or v < 1 for v in values):
            raise ReportError(f"{where}: k must be whole numbers >= 1")
        return Sweep("k", list(dict.fromkeys(values)))
    if name in ("lambda", "lam"):
        sweep = Sweep("lambda", [])
        for p in parts:
            value, colon, d = p.partition(":")
            if not colon or not d.strip():
                raise ReportError(f"{where}: each lambda needs its retriever adapter: "
                                  "lambda=0.001:DIR1,0.01:DIR2")
            lam = float(_number(value.strip(), where))
            path = Path(d.strip())
            if not (path / "talent_meta.json").is_file():
                raise ReportError(f"{where}: {path} is not a retriever adapter directory "
                                  "(no talent_meta.json)")
            sweep.values.append(lam)
            sweep.dirs[str(lam)] = str(path)
        return sweep
    if name not in RetrievalConfig.model_fields or name == "stopwords":
        known = ", ".join(f for f in RetrievalConfig.model_fields if f != "stopwords")
        raise ReportError(f"{where}: unknown sweep {name!r} (k, lambda or a retrieval "
                          f"setting: {known})")
    kind = type(getattr(base, name))
    values: list[Any] = []
    for p in parts:
        v: Any = p if kind is str else (p.lower() in ("1", "true", "yes") if kind is bool
                                        else _number(p, where))
        try:
            values.append(getattr(apply_overrides(base, **{name: v}), name))
        except RetrievalSettingsError as e:
            raise ReportError(f"{where}: {e.problems[0][1]}") from None
    return Sweep(name, list(dict.fromkeys(values)))


def sweep_points(sweeps: Sequence[Sweep]) -> list[Point]:
    """The cartesian product of the sweeps, in the order given ([{}] without sweeps)."""
    return [dict(zip([s.name for s in sweeps], combo, strict=True))
            for combo in itertools.product(*[s.values for s in sweeps])]


def retrieval_overrides(point: Point) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in point.items():
        if k == "k":
            out.update(k_nodes=v, k_edges=v, beam=v)
        elif k != "lambda":
            out[k] = v
    return out


@dataclass
class ReportOptions:
    files: list[Path]
    fmt: str
    methods: list[str]
    modes: list[str]
    sweeps: list[Sweep]
    limit: int | None = None
    offset: int = 0
    sample_seed: int | None = None
    annotations: Path | None = None

    @property
    def llm(self) -> bool:
        return any(METHODS[m].llm for m in self.methods)

    @classmethod
    def parse(cls, files: Sequence[Path], fmt: str, methods: str | None, modes: str | None,
              sweeps: Sequence[str] | None, base: RetrievalConfig, limit: int | None = None,
              offset: int = 0, sample_seed: int | None = None,
              annotations: Path | None = None) -> ReportOptions:
        """Validated options; a bad value raises ReportError naming the option."""
        if fmt not in REPORT_FORMATS:
            raise ReportError(f"--format must be {' | '.join(REPORT_FORMATS)}, not {fmt!r}")
        for f in files:
            if not Path(f).is_file():
                raise ReportError(f"{f}: no such file")
        names = parse_methods(methods, fmt)
        mode_list = parse_modes(modes, names)
        parsed = [parse_sweep(s, base) for s in sweeps or []]
        seen = [s.name for s in parsed]
        if len(set(seen)) != len(seen):
            twice = sorted({n for n in seen if seen.count(n) > 1})
            raise ReportError(f"--sweep: {', '.join(twice)} swept twice")
        if "k" in seen and {"k_nodes", "k_edges", "beam"} & set(seen):
            raise ReportError("--sweep k sets k_nodes, k_edges and beam together: "
                              "do not sweep them separately as well")
        if "lambda" in seen and not (any(METHODS[m].llm for m in names) and "full" in mode_list):
            raise ReportError("--sweep lambda needs an LLM method (llm-ranked, llm-free) "
                              "in mode full")
        if fmt == "explagraphs" and any(s.name != "lambda" for s in parsed):
            raise ReportError("--format explagraphs: the whole graph is S; only a lambda "
                              "sweep applies")
        if annotations is not None and not Path(annotations).is_file():
            raise ReportError(f"--annotations: {annotations}: no such file")
        return cls([Path(f) for f in files], fmt, names, mode_list, parsed, limit, offset,
                   sample_seed, Path(annotations) if annotations else None)

