"""The commands' options. Most are generated from a pydantic model's fields, so that a setting
(its name, type, default and help) is declared once, in the model, and every command that
takes it agrees; the options several commands share are declared here once.

    RetrievalOptions = model_options(RetrievalConfig)

    @app.command()
    @with_options(RetrievalOptions, into="retrieval")
    def retrieve(question: str, retrieval: dict[str, Any]) -> None: ...

Every generated option defaults to None ("not given"): the command receives, in the one
keyword argument ``into``, a dict of the options that were given; the model supplies the
rest (the model's default is what `--help` shows). The model choice `talent ask` and
`talent eval` share comes as one `ModelChoice` (`@model_choice`, its options where the
command declares ``models``).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel

from talent_core.commands.console import fail
from talent_core.errors import RetrievalSettingsError
from talent_core.models import DECODES
from talent_core.questions import QUESTION_FORMATS, QuestionFormat, detect_question_format
from talent_core.retrieval.config import RetrievalConfig, apply_overrides

_SCALARS = (bool, int, float, str)


def _cli_type(annotation: Any) -> tuple[type | None, tuple[str, ...]]:
    """(the scalar type typer parses, the Literal's choices) of a field annotation; None for
    a type the command line cannot give (lists, nested models)."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return str, tuple(str(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _cli_type(inner[0]) if len(inner) == 1 else (None, ())
    return (annotation, ()) if annotation in _SCALARS else (None, ())


def option_name(field: str) -> str:
    """`k_nodes` -> `--k-nodes`."""
    return "--" + field.replace("_", "-")


def model_options(
    model: type[BaseModel],
    names: Iterable[str] | None = None,
    *,
    help: Mapping[str, str] | None = None,
    flags: Mapping[str, str] | None = None,
) -> list[inspect.Parameter]:
    """One keyword-only typer option per field of ``model`` (all scalar fields, or
    ``names``): `--field-name` (or ``flags[name]``), the field's description (or
    ``help[name]``) as help, the model's default shown, default None."""
    out = []
    for name in names if names is not None else model.model_fields:
        field = model.model_fields[name]
        typ, choices = _cli_type(field.annotation)
        if typ is None:
            if names is not None:
                raise TypeError(f"{model.__name__}.{name}: no command-line type")
            continue
        text = (help or {}).get(name) or field.description or ""
        if choices:
            text += f" ({' | '.join(choices)})"
        flag = (flags or {}).get(name) or option_name(name)
        if typ is bool and "/" not in flag:
            flag = f"{flag}/--no-{flag.removeprefix('--')}"
        default = field.get_default(call_default_factory=True)
        option = typer.Option(flag, help=text,
                              show_default=False if default is None else str(default))
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=Annotated[typ | None, option]))
    return out


def declared_options(annotations: Mapping[str, Any],
                     defaults: Mapping[str, Any] | None = None) -> list[inspect.Parameter]:
    """One keyword-only typer option per (name, ``Annotated[type, typer.Option(...)]``),
    default None (or ``defaults[name]``): the options a `with_options` group declares."""
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                              default=(defaults or {}).get(name))
            for name, annotation in annotations.items()]


def with_options(params: list[inspect.Parameter], into: str,
                 make: Callable[[dict[str, Any]], Any] = dict) -> Callable:
    """Decorator: the typer command gets ``params`` as options, where it declares ``into``
    (a keyword-only ``into``: after all its own options), and receives the ones given (not
    None) in its argument ``into``: one dict, or ``make(dict)``."""
    names = [p.name for p in params]

    def decorate(command: Callable) -> Callable:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != into]
        clash = set(names) & {p.name for p in own}
        if clash:
            raise TypeError(f"{command.__name__}: {sorted(clash)} declared twice")
        kind = sig.parameters[into].kind
        at_end = kind is inspect.Parameter.KEYWORD_ONLY
        at = len(own) if at_end else list(sig.parameters).index(into)
        placed = [p.replace(kind=kind) for p in params]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {n: v for n in names if (v := kwargs.pop(n, None)) is not None}
            return command(*args, **kwargs, **{into: make(given)})

        wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*own[:at], *placed, *own[at:]])
        wrapper.__annotations__ = {}  # the signature carries the (evaluated) annotations
        return wrapper

    return decorate


# one --option per RetrievalConfig field (--k-nodes, --k-edges, --beam, --hops, --edge-cost,
# --prizes, --fanout, ...): the command receives the given ones as `retrieval`
retrieval_options = with_options(model_options(RetrievalConfig), into="retrieval")
QuestionFormatOpt = Annotated[str | None, typer.Option(
    "--format", help=" | ".join(QUESTION_FORMATS) + " (default: guessed from the file name; "
    "a typed question: TALENT_QUESTION_FORMAT)")]
Topic = Annotated[
    list[str] | None, typer.Option("--topic", help="topic entity name (repeatable)")
]
DecodeOpt = Annotated[str | None, typer.Option(
    "--decode", help="ranked: every candidate name scored by the model, answers are KG nodes "
    "(default, TALENT_DECODE); free: the paper's greedy decoding")]
AdaptersOpt = Annotated[str | None, typer.Option(
    "--adapters", help="bundled (the shipped trained adapters; default, TALENT_ADAPTERS), "
    "none (the frozen base model), or a directory with retriever/ and generator/")]
GeneratorTypeOpt = Annotated[str | None, typer.Option(
    "--generator-type", help="text (the context as CSV rows; default, TALENT_GENERATOR_TYPE) "
    "or graph-prompt (G-Retriever: the rows plus GNN soft tokens; adapters' generator-graph/ "
    "or --generator DIR)")]
PlannerOpt = Annotated[str | None, typer.Option(
    "--planner", help="the relation-path planner that re-weights ranked answers: bundled "
    "(the matcher `talent train planner --self` adapted to this store, else the shipped "
    "one; default, TALENT_PLANNER), zero-shot (the untrained encoder as the matcher), none, "
    "or a matcher directory from `talent train planner`")]
RetrieverDirOpt = Annotated[Path | None, typer.Option(
    "--retriever", help="retriever adapter dir (default: the --adapters choice)")]
GeneratorDirOpt = Annotated[Path | None, typer.Option(
    "--generator", help="generator adapter dir (default: the --adapters choice)")]
BaseModelOpt = Annotated[str | None, typer.Option(
    "--base-model", help="the base language model (default: TALENT_BASE_MODEL)")]
FrozenRetriever = Annotated[bool, typer.Option(
    "--frozen-retriever", help="the retriever runs without adapter (ablation)")]
Verbose = Annotated[bool, typer.Option("-v")]


@dataclass(frozen=True)
class ModelChoice:
    """The model choice `talent ask` and `talent eval` share: which adapters, base model,
    decoding, generator type and planner the Pipeline loads (declared once, with its
    options in MODEL_CHOICE_OPTIONS)."""

    retriever: Path | None = None
    generator: Path | None = None
    base_model: str | None = None
    decode: str | None = None
    adapters: str | None = None
    generator_type: str | None = None
    frozen_retriever: bool = False
    planner: str | None = None

    def given(self, without: Iterable[str] = ()) -> list[str]:
        """The `--options` given (set to a true value), in this order, but ``without``."""
        return [option_name(f.name) for f in fields(self)
                if f.name not in without and getattr(self, f.name)]

    def for_stance(self) -> ModelChoice:
        """The choice of the stance task: it ranks its labels (no --decode) and plans no
        relation path (no --planner)."""
        return replace(self, decode=None, planner=None)


DEFAULT_MODELS = ModelChoice()  # what a command declares `models` as (@model_choice fills it)
# what a command declares a with_options dict as where its options go (the decorator fills it)
NONE_GIVEN: Mapping[str, Any] = types.MappingProxyType({})
# ModelChoice's options (field: annotation), in its order
MODEL_CHOICE_OPTIONS = {"retriever": RetrieverDirOpt, "generator": GeneratorDirOpt,
                        "base_model": BaseModelOpt, "decode": DecodeOpt,
                        "adapters": AdaptersOpt, "generator_type": GeneratorTypeOpt,
                        "frozen_retriever": FrozenRetriever, "planner": PlannerOpt}
# --retriever, --generator, --base-model, --decode, --adapters, --generator-type,
# --frozen-retriever, --planner: the command receives them as one ModelChoice `models`
model_choice = with_options(
    declared_options(MODEL_CHOICE_OPTIONS, {f.name: f.default for f in fields(ModelChoice)}),
    into="models", make=lambda given: ModelChoice(**given))


def check_decode(decode: str | None) -> str | None:
    """--decode, checked."""
    if decode is not None and decode not in DECODES:
        raise fail(f"--decode must be {' or '.join(DECODES)}, not {decode!r}")
    return decode


def retrieval_config(given: dict[str, Any]) -> RetrievalConfig:
    """RetrievalConfig from the given retrieval options (the others keep their defaults);
    a bad value exits with code 2 and a message naming the option."""
    try:
        return apply_overrides(RetrievalConfig(), **given)
    except RetrievalSettingsError as e:
        raise fail("; ".join(f"{option_name(f)}: {m}" for f, m in e.problems)) from None


def question_format(fmt: str | None, path: Path | None) -> QuestionFormat | None:
    """The --format of a question file (guessed from its name when not given); None for a
    typed question without --format (the Pipeline's default)."""
    if fmt is not None and fmt not in QUESTION_FORMATS:
        raise fail(f"--format must be {' or '.join(QUESTION_FORMATS)}, not {fmt!r}")
    if fmt is None and path is not None:
        return detect_question_format(path)
    return fmt  # type: ignore[return-value]
