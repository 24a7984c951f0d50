"""Every error TaLenT raises on purpose: one root, `TalentError`, that the CLI and the UI
catch; the domain errors are its subclasses (and keep their ValueError/RuntimeError base
where callers catch those)."""

from __future__ import annotations

from typing import ClassVar


class TalentError(Exception):
    """Root of TaLenT's own errors: the message is for the user, one line. `exit_code` is
    the CLI's exit status for it."""

    exit_code: ClassVar[int] = 2


# --- user input ---------------------------------------------------------------------------


class TextInputError(TalentError, ValueError):
    """Text given by a user (a question, an argument) that cannot be used; `str()` is a
    one-line message fit for the terminal."""


class QuestionFileError(TalentError, ValueError):
    """A question file that is missing or cannot be read."""


class GraphSyntaxError(TalentError, ValueError):
    """Text that is not an explanation graph `(a; rel; b)(c; rel; d)`."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"not an explanation graph: {reason}")


class RetrievalSettingsError(TalentError, ValueError):
    """Bad retrieval overrides; `problems` lists (field, what is wrong)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("bad retrieval settings: " + "; ".join(f"{f}: {m}" for f, m in problems))


# --- models and trained artefacts ---------------------------------------------------------


class SettingsError(TalentError, ValueError):
    """A setting (a TALENT_ variable of the environment or `.env`) with a value it cannot
    take: the message names the variable, the value and the problem."""


class UnsupportedModel(TalentError, ValueError):
    """The model is not a plain BERT + mean pooling sentence-transformers directory."""


class BaseModelMismatch(TalentError, ValueError):
    """An adapter was trained on another base model than the one it is loaded onto."""


class PromptTooLong(TalentError, ValueError):
    """Even with every graph row dropped, the prompt (and target) exceeds the budget."""


class DataError(TalentError, ValueError):
    """A bad input record: the message names the file and line."""


class ResumeMismatch(TalentError, ValueError):
    """The training state in the output directory belongs to another configuration or data
    (LLM adapters and SubgraphRAG's scorer alike)."""


class TrainingDataError(TalentError, ValueError):
    """Training questions of which none can be trained on (no label reaches an answer)."""


class ScorerError(TalentError, ValueError):
    """A scorer checkpoint that is missing, malformed or does not fit the store/embedder."""


class TrainingBusyError(TalentError, RuntimeError):
    """The same matcher is being trained by another process or job right now."""


class PlannerError(TalentError, ValueError):
    """A planner directory that cannot be used (missing, malformed, another embedder)."""


# --- store ------------------------------------------------------------------------------


class ExportError(TalentError):
    """The export cannot start (target not empty, store not readable this way)."""


class EmbeddedServerError(TalentError, RuntimeError):
    """The embedded FalkorDB server could not be started or reached."""


class DataDirError(EmbeddedServerError):
    """The data dir is not safe to use: another user owns or could replace it, or a file in
    it (the socket above all). Raised before anything follows a link into it, writes in it
    or talks to a socket there."""


class LLMServerError(TalentError, RuntimeError):
    """The language-model server (TALENT_LLM_BACKEND=openai) could not give what was asked:
    down, too slow, an HTTP error, a reply that is not an OpenAI one, a model it does not
    serve, no prompt log-probabilities. One line; the CLI exits 2, the API answers 502.
    ``status``: the HTTP status it answered with (None: it gave none)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class LogprobsUnavailable(LLMServerError):
    """The server gives no usable log-probabilities for ranked decoding (none returned,
    ``logit_bias`` ignored, no ``/completions``): with TALENT_LLM_SCORING=auto the model
    then chooses among numbered candidates instead (`llm.server_choice`)."""


# --- HTTP API ---------------------------------------------------------------------------


class ApiKeyError(TalentError, ValueError):
    """An API key request that cannot be done (bad name or scope, unknown key, a keys file
    that cannot be read or written)."""


class ApiClientError(TalentError, RuntimeError):
    """A request to a `talent serve` that did not give an answer: the server could not be
    reached, or it refused the request (its error code and message are kept)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.code = status, code


# --- loading ----------------------------------------------------------------------------


class LoadError(TalentError):
    """A load stopped on bad input; `str()` is `file:line: reason` (or `file: reason`).
    The CLI exits 1: the input is at fault."""

    exit_code: ClassVar[int] = 1

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

    exit_code: ClassVar[int] = 2



class SourceError(TalentError, ValueError):
    """A sources command that cannot run: an unknown source, a reserved name (`legacy`), a
    --replace of a source another load is writing. The CLI exits 1."""

    exit_code: ClassVar[int] = 1

class StoreBusyError(TalentError, RuntimeError):
    """A job would overlap another of the same store: an unload or replace runs alone (its
    sweeps delete what a load wrote but has not linked yet). The CLI exits 1."""

    exit_code: ClassVar[int] = 1


class LineError(TalentError):
    """A problem confined to one physical line (the source can continue after it)."""

    def __init__(self, line: int, reason: str, raw: str):
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason
        self.raw = raw


class RecordTooLong(LineError):
    """A multi-line record (a CSV quoted field spanning lines) passed the record bounds;
    `line` is the record's first line."""


class NTriplesSyntaxError(TalentError, ValueError):
    """A malformed N-Triples term or escape."""
