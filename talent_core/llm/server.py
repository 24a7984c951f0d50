"""The `openai` language-model backend: both LLM roles on an OpenAI-compatible server (vLLM,
llama.cpp's llama-cpp-python server, Ollama, a hosted API) instead of in-process weights.

`ServerLM` offers what the roles use of `lm.LoadedLM` — ``score`` (ranked decoding),
``generate`` (free decoding), the tokenizer (prompt rendering and budgets), the adapters'
metadata — over HTTP, through the server's ``/v1/completions``:

* Prompts are rendered here with the tokenizer named in the settings (the base model's by
  default: the chat template and token budgets are the same as the local backend's) and
  sent as text.
* Ranked decoding, the same definition as `ranking` (`server_scoring`: each token of a
  name forced with ``logit_bias`` and its log-probability read, or the prompt's
  log-probabilities echoed; `Settings.llm_scoring`), requests in parallel. A server without
  log-probabilities (Ollama, hosted APIs): the model chooses among the numbered names
  (`server_choice`: structured output where the server takes a JSON schema, else its free
  text grounded in the names); ``auto`` switches to that on the first reply without them.
* Adapters: a role uses its adapter when the server serves it as a model (vLLM
  ``--lora-modules retriever=... generator=...``, or `Settings.llm_retriever_model` /
  ``llm_generator_model``); otherwise the role runs the server's base model, frozen, and
  says so. The graph-prompt generator's soft tokens cannot go over HTTP: local only.
* Faults (down, slow, 4xx/5xx, a reply that is not an OpenAI one, a model it does not serve,
  no prompt log-probabilities): bounded retries with back-off where a retry can help, then
  one `LLMServerError` line (the CLI exits 2, the API answers 502). The API key is sent as
  a bearer token and never logged or repeated.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from talent_core.config import Settings, get_settings
from talent_core.errors import LLMServerError, LogprobsUnavailable
from talent_core.llm.models import AdapterMeta, load_tokenizer, read_meta, resolve_base_model
from talent_core.llm.ranking import Scored
from talent_core.llm.server_choice import (
    FORMATS,
    choice_body,
    choice_scores,
    messages,
    read_choice,
)
from talent_core.llm.server_scoring import Job, JobResult, echo_jobs, forced_jobs
from talent_core.models import LLMBackend, Ranking

log = logging.getLogger(__name__)

RETRY_STATUS = (408, 429, 500, 502, 503, 504)


class ServerClient:
    """The few calls of the OpenAI API this product makes, with time-outs, bounded retries
    and one clear error per fault (`LLMServerError`)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 2, backoff: float = 0.5):
        import httpx

        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        self.timeout, self.retries, self.backoff = timeout, retries, backoff

    def close(self) -> None:
        self._http.close()

    def _fail(self, what: str, status: int | None = None) -> LLMServerError:
        return LLMServerError(f"language-model server {self.base_url}: {what}", status)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None
                ) -> dict[str, Any]:
        """One JSON call; retried (``retries`` times, back-off doubling) on a refused or
        dropped connection, a time-out and HTTP 408/429/5xx."""
        import httpx

        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                r = self._http.request(method, path, json=body)
            except httpx.TimeoutException:
                if last:
                    raise self._fail(f"no answer within {self.timeout:g}s (TALENT_LLM_TIMEOUT)"
                                     ) from None
            except httpx.TransportError as e:
                if last:
                    raise self._fail(f"cannot connect ({type(e).__name__}: {e}); is it "
                                     "running? (TALENT_LLM_BASE_URL)") from None
            else:
                if r.status_code in RETRY_STATUS and not last:
                    pass
                elif r.status_code >= 400:
                    raise self._status_error(r, body)
                else:
                    try:
                        reply = r.json()
                    except ValueError:
                        raise self._fail(f"{path} sent a reply that is not JSON: "
                                         f"{r.text[:120]!r}") from None
                    if not isinstance(reply, dict):
                        raise self._fail(f"{path} sent {type(reply).__name__}, not an object")
                    return reply
            wait = self.backoff * 2**attempt
            log.info("language-model server: %s %s failed (try %d of %d); again in %.1fs",
                     method, path, attempt + 1, self.retries + 1, wait)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _status_error(self, r: Any, body: dict[str, Any] | None) -> LLMServerError:
        detail = _error_text(r)
        if r.status_code in (401, 403):
            return self._fail(f"HTTP {r.status_code}: the API key was refused "
                              "(TALENT_LLM_API_KEY)", r.status_code)
        model = (body or {}).get("model")
        if model and r.status_code in (400, 404) and "model" in detail.lower():
            try:
                served = ", ".join(self.models()) or "none"
            except LLMServerError:
                served = "unknown"
            return self._fail(f"does not serve the model {model!r} (it serves: {served}); "
                              f"HTTP {r.status_code}: {detail}", r.status_code)
        return self._fail(f"HTTP {r.status_code}: {detail}", r.status_code)

    def models(self) -> list[str]:
        """The model names the server lists (GET /models)."""
        reply = self.request("GET", "/models")
        data = reply.get("data")
        if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m
                                                 for m in data):
            raise self._fail(f"/models sent no model list: {json.dumps(reply)[:120]}")
        return [str(m["id"]) for m in data]

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /completions; the first choice."""
        reply = self.request("POST", "/completions", body)
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._fail(f"/completions sent no choices: {json.dumps(reply)[:160]}")
        return {**choices[0], "usage": reply.get("usage") or {}}

    def chat(self, body: dict[str, Any]) -> tuple[str, bool]:
        """POST /chat/completions; the first choice's message text, and whether it stopped
        at ``max_tokens``."""
        reply = self.request("POST", "/chat/completions", body)
        choices = reply.get("choices")
        message = (choices[0].get("message") if isinstance(choices, list) and choices
                   and isinstance(choices[0], dict) else None)
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._fail(f"/chat/completions sent no message: {json.dumps(reply)[:160]}")
        return content, choices[0].get("finish_reason") == "length"


def graph_prompt_refused() -> LLMServerError:
    """The one refusal of the graph-prompt generator on this backend (before any request,
    `loading.load_models`; or when a role asks for its soft tokens)."""
    return LLMServerError("the graph-prompt generator (G-Retriever soft tokens) runs on the "
                          "local backend only: its soft tokens cannot go over HTTP; use "
                          "--generator text with TALENT_LLM_BACKEND=openai")


def _error_text(r: Any) -> str:
    try:
        err = r.json()
    except ValueError:
        return r.text[:200].strip() or r.reason_phrase
    if isinstance(err, dict):
        e = err.get("error", err)
        msg = e.get("message") if isinstance(e, dict) else e
        return str(msg or err.get("detail") or err)[:200]
    return str(err)[:200]


class ServerLM:
    """`LoadedLM`'s interface for the roles, on an OpenAI-compatible server (module doc)."""

    backend: LLMBackend = "openai"

    def __init__(self, adapters: dict[str, Path] | None = None, settings: Settings | None = None,
                 client: ServerClient | None = None):
        settings = settings or get_settings()
        if client is None:
            if not settings.llm_base_url:
                raise LLMServerError("TALENT_LLM_BACKEND=openai needs TALENT_LLM_BASE_URL "
                                     "(e.g. http://127.0.0.1:8000/v1)")
            key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
            client = ServerClient(settings.llm_base_url, key, settings.llm_timeout,
                                  settings.llm_retries)
        self.client = client
        served = client.models()
        wanted = {"retriever": settings.llm_retriever_model,
                  "generator": settings.llm_generator_model}
        if settings.llm_model:
            if settings.llm_model not in served:
                raise client._fail(f"does not serve the model {settings.llm_model!r} "
                                   f"(TALENT_LLM_MODEL; it serves: {', '.join(served) or 'none'})")
            default = settings.llm_model
        else:  # the one model it lists that is not an adapter's
            bases = [m for m in served if m not in {"retriever", "generator", *wanted.values()}]
            if len(bases) != 1:
                raise client._fail(f"serves {len(served)} models ({', '.join(served) or 'none'}"
                                   "): name the base model with TALENT_LLM_MODEL")
            default = bases[0]
        self.models: dict[str | None, str] = {None: default}
        self.metas: dict[str, AdapterMeta] = {}
        self.paths: dict[str, Path] = {}
        for name, path in (adapters or {}).items():
            model = wanted.get(name) or (name if name in served else None)
            if model is None:
                log.warning("the server serves no model named %r: the %s runs the base model "
                            "%r frozen (serve the adapter as %r, or set TALENT_LLM_%s_MODEL)",
                            name, name, default, name, name.upper())
                continue
            if model not in served:
                raise client._fail(f"does not serve the model {model!r} "
                                   f"(TALENT_LLM_{name.upper()}_MODEL; it serves: "
                                   f"{', '.join(served)})")
            self.models[name] = model
            self.metas[name] = read_meta(Path(path))
            self.paths[name] = Path(path)
        self.base_name = settings.llm_tokenizer or settings.base_model
        self.tokenizer = load_tokenizer(resolve_base_model(self.base_name,
                                                           settings.model_cache_dir))
        self.scoring = settings.llm_scoring
        self.way = "forced" if self.scoring == "auto" else self.scoring  # how names are ranked
        self._chat_only = False  # free decoding through /chat/completions (no /completions)
        self._format = 0  # the first of server_choice.FORMATS this server has not refused
        self._pool = ThreadPoolExecutor(settings.llm_concurrency, thread_name_prefix="talent-llm")

    # --- what the roles call ---------------------------------------------------------------
    def model_name(self, adapter: str | None) -> str:
        return self.models.get(adapter, self.models[None])

    def describe(self, adapter: str | None) -> str:
        return f"{self.model_name(adapter)} @ {self.client.base_url}"

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def ensure_adapter(self, name: str, path: Path) -> None:
        if name not in self.models:
            raise LLMServerError(f"the {name!r} adapter is not served by {self.client.base_url}"
                                 f": serve it as a model named {name!r} (vLLM --lora-modules)")

    def graph_prompt(self, name: str) -> Any:
        raise graph_prompt_refused()

    @property
    def ranking(self) -> Ranking:
        return "choice" if self.way == "choice" else "logprobs"

    def score(self, prompt: str, adapter: str | None, names: Sequence[str], prefix: Any = None,
              head: str = "", chat: tuple[str, str] = ("", "")) -> list[Scored]:
        """Every distinct name's score, requests in parallel (`Settings.llm_concurrency`):
        "forced" (each token of the name forced after its prefix,
        `server_scoring.forced_jobs`), "echo" (`server_scoring.echo_jobs`) or "choice"
        (`server_choice`; ``chat``: the prompt's system and user turns); "auto": forced
        until a reply shows the server has no log-probabilities, then choice."""
        if prefix is not None:
            self.graph_prompt(adapter or "")
        unique = list(dict.fromkeys(n for n in names if n))
        if not unique:
            return []
        if self.way != "choice":
            try:
                return self._logprob_scores(prompt, adapter, unique)
            except LogprobsUnavailable as e:
                if self.scoring != "auto":
                    raise
                log.warning("%s; ranking by the model's choice among the names from now on "
                            "(TALENT_LLM_SCORING=auto)", e)
                self.way = "choice"
        return choice_scores(unique, self._choose(prompt, adapter, unique, chat))

    def _logprob_scores(self, prompt: str, adapter: str | None, unique: list[str]
                        ) -> list[Scored]:
        model = self.model_name(adapter)
        plan = (echo_jobs(self.tokenizer, prompt, unique) if self.way == "echo"
                else forced_jobs(self.tokenizer, prompt, unique))

        def run(job: Job) -> JobResult:
            try:
                return job.read(self.client.completion({"model": model, **job.body}))
            except LogprobsUnavailable:
                raise
            except LLMServerError as e:  # no /completions (chat only), or logprobs refused
                if e.status == 404 or "logprob" in str(e).lower():
                    raise LogprobsUnavailable(str(e), e.status) from None
                raise

        results = dict(zip(plan.jobs, self._pool.map(run, plan.jobs), strict=True))
        return [Scored(n, plan.score(n, results)) for n in unique]

    def _choose(self, prompt: str, adapter: str | None, names: list[str],
                chat: tuple[str, str]) -> list[str]:
        """The names the model chose (`server_choice`), through the first response format
        the server takes: a 400 or 422 (or an error naming response_format) refusing one
        moves to the next, for good."""
        system, user = chat if any(chat) else ("", prompt)
        model = self.model_name(adapter)
        while True:
            fmt = FORMATS[self._format]
            body = choice_body(system, user, names, fmt)
            try:
                content, _ = self.client.chat({"model": model, **body})
            except LLMServerError as e:
                refused = (e.status in (400, 422)
                           or "response_format" in str(e))  # llama-cpp-python: HTTP 500
                if not refused or fmt == FORMATS[-1]:
                    raise
                log.info("the server refused response_format %s (%s); trying the next", fmt, e)
                # idempotent: concurrent asks refused on the same format move past it once
                self._format = max(self._format, FORMATS.index(fmt) + 1)
                continue
            chosen, structured = read_choice(content, names)
            if not structured:
                log.info("choice reply was not the schema's JSON; grounded as free text: %r",
                         content[:80])
            return chosen

    def generate(self, prompt: str, adapter: str | None, max_new_tokens: int,
                 prefix: Any = None, chat: tuple[str, str] = ("", "")) -> Any:
        """Greedy completion (temperature 0) of ``prompt``; on a chat-only server (HTTP 404
        on /completions) the same turns (``chat``) through /chat/completions."""
        from talent_core.llm.lm import Generation

        if prefix is not None:
            self.graph_prompt(adapter or "")
        model = self.model_name(adapter)
        if not self._chat_only:
            try:
                choice = self.client.completion({
                    "model": model, "prompt": prompt, "max_tokens": max_new_tokens,
                    "temperature": 0.0})
            except LLMServerError as e:
                if e.status != 404 or not any(chat):
                    raise
                log.warning("%s: answering through /chat/completions from now on", e)
                self._chat_only = True
            else:
                text = choice.get("text")
                if not isinstance(text, str):
                    raise self.client._fail(f"/completions sent no text: {str(choice)[:160]}")
                usage = choice.get("usage") or {}
                prompt_tokens = usage.get("prompt_tokens")
                new_tokens = usage.get("completion_tokens")
                return Generation(text, choice.get("finish_reason") == "length",
                                  int(prompt_tokens) if prompt_tokens
                                  else self.count_tokens(prompt),
                                  int(new_tokens) if new_tokens else self.count_tokens(text))
        text, cut = self.client.chat({"model": model, "max_tokens": max_new_tokens,
                                      "temperature": 0.0, "messages": messages(*chat)})
        return Generation(text, cut, self.count_tokens(prompt), self.count_tokens(text))
