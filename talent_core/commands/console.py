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


class TqdmHandler(logging.StreamHandler):
    """Log lines on stderr written through tqdm, so that a progress bar on the terminal
    stays one intact line under them."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=sys.stderr)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def setup_logging(verbose: bool) -> None:
    """Log lines on stderr (through tqdm: a bar stays intact): INFO with -v, else warnings
    only."""
    handler = TqdmHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        handlers=[handler])
