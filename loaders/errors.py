"""The error a load stops with on bad input."""

from __future__ import annotations


class LoadError(Exception):
    """A load stopped on bad input; `str()` is `file:line: reason` (or `file: reason`)."""

    def __init__(self, source: str, line: int | None, reason: str, raw: str | None = None):
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason
        self.raw = raw


class OutputError(LoadError):
    """A load that cannot write where it must (an output path that is an input, no space
    left on device): not a fault of the input, so the CLI exits 2, not 1."""
