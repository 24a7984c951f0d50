"""Typer options generated from a pydantic model's fields, so that a setting (its name, type,
default and help) is declared once, in the model, and every command that takes it agrees.

    RetrievalOptions = model_options(RetrievalConfig)

    @app.command()
    @with_options(RetrievalOptions, into="retrieval")
    def retrieve(question: str, retrieval: dict[str, Any]) -> None: ...

Every generated option defaults to None ("not given"): the command receives, in the one
keyword argument ``into``, a dict of the options that were given; the model supplies the
rest (the model's default is what `--help` shows).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel

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


def with_options(params: list[inspect.Parameter], into: str) -> Callable:
    """Decorator: the typer command gets ``params`` as options, and receives the ones given
    (not None) as one dict in its keyword argument ``into``."""
    names = [p.name for p in params]

    def decorate(command: Callable) -> Callable:
        sig = inspect.signature(command, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != into]
        clash = set(names) & {p.name for p in own}
        if clash:
            raise TypeError(f"{command.__name__}: {sorted(clash)} declared twice")

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {n: v for n in names if (v := kwargs.pop(n, None)) is not None}
            return command(*args, **kwargs, **{into: given})

        wrapper.__signature__ = sig.replace(parameters=[*own, *params])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {}  # the signature carries the (evaluated) annotations
        return wrapper

    return decorate
