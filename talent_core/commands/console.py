"""The commands' one error printer: a failure is `error: ...` on stderr with control
characters escaped (KG and user text must not drive the terminal), and an exit code. Also
the commands' logging setup and their echo of KG or model text."""

from __future__ import annotations

import logging
import sys

import typer

from talent_core.errors import LoadError, TalentError
from talent_core.text import printable


def fail(message: str, code: int = 2) -> typer.Exit:
    """Say `message` on stderr; returns the Exit to raise (`raise fail(...) from None`)."""
    typer.echo(f"error: {printable(message, keep_newlines=True)}", err=True)
    return typer.Exit(code=code)


def fail_with(e: TalentError) -> typer.Exit:
    """`fail` for one of TaLenT's errors: its message (and a load's bad row), its exit code."""
    out = fail(str(e), e.exit_code)
    if isinstance(e, LoadError) and e.raw:
        typer.echo(f"  row: {printable(e.raw[:300])}", err=True)
    return out


def echo(text: str) -> None:
    """A line of KG or model text on the terminal: control characters escaped."""
    typer.echo(printable(text, keep_newlines=True))


def setup_logging(verbose: bool) -> None:
    """Log lines on stderr: INFO with -v, else warnings only."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
