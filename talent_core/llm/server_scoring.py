"""Ranked decoding through an OpenAI-compatible ``/v1/completions``: which requests score a
list of names, and how each reply is read (pure; `server.ServerLM.score` sends them).

The score is `ranking`'s: log p(name | prompt) + log(p("|" | prompt, name) + p(EOS | prompt,
name)). Two ways to get it from a server:

* **forced** (the default): for a name of tokens t1..tn, n + 2 short requests without echo;
  request j sends the prompt and t1..tj as text, forces t(j+1) with ``logit_bias`` and
  reads its log-probability (servers report it before the bias: llama.cpp, vLLM); the last
  two force "|" and read p(EOS) from a top list (EOS cannot be forced: generation stops on
  it): a top 20 and a top 100. llama-cpp-python names every special token "" there,
  keeping the LAST (least likely) of them: in the top 20 EOS is usually the only special
  token, so that value is taken where present; else the top 100's "" (EOS, or an
  underestimate when another special token ranks there too); absent from both: 0.
  Requests that two names share (a common first word) are sent once. Each is short: the
  server reuses the prompt's cache and returns one token's log-probabilities.
* **echo**: two requests per name (followed by "|", and by the end-of-turn token), each
  echoing the prompt's log-probabilities (``echo`` + ``logprobs``); exact wherever the server
  supports it (vLLM), but llama-cpp-python sorts the whole vocabulary for every prompt
  token of every request: minutes per name on CPU (bench/README.md).

A character split over several tokens (a multi-byte one: "ñ") cannot be sent as text
between them: its tokens are forced in one request (all biased, as many generated) and
their log-probabilities summed when the server wrote them in order. Only a name that does
not end on a whole character is scored the echo way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from talent_core.errors import LLMServerError, LogprobsUnavailable
from talent_core.llm.ranking import scoring_inputs

log = logging.getLogger(__name__)

IMPOSSIBLE = -1e4  # a name the server would not write (`_forced_run`)
TOP_K = (20, 100)  # the top lists the forced end requests ask for (p(EOS) is read there)
FORCE = 100.0  # logit bias that makes a token the greedy choice

JobResult = tuple[float, dict[str, float]]  # (the read log-probability, the top list)


@dataclass(frozen=True)
class Job:
    """One /v1/completions request (its body without the model) and how to read it."""

    body_items: tuple[tuple[str, Any], ...]
    reader: Callable[[dict[str, Any]], JobResult] = field(compare=False, hash=False)

    @property
    def body(self) -> dict[str, Any]:
        body = dict(self.body_items)
        if "logit_bias" in body:  # kept as pairs: a Job is hashable (shared steps sent once)
            body["logit_bias"] = dict(body["logit_bias"])
        return body

    def read(self, choice: dict[str, Any]) -> JobResult:
        return self.reader(choice)


@dataclass
class Plan:
    """The requests scoring some names, and how each name's score is put together."""

    jobs: list[Job]
    combine: dict[str, Callable[[dict[Job, JobResult]], float]]

    def score(self, name: str, results: dict[Job, JobResult]) -> float:
        return self.combine[name](results)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _malformed(lp: object) -> LLMServerError:
    return LLMServerError(f"malformed log-probabilities from the server: {str(lp)[:160]}")


def _no_logprobs() -> LLMServerError:
    return LogprobsUnavailable(
        "the server returned no log-probabilities: ranked decoding needs them (vLLM; "
        "llama-cpp-python with --logits_all true); or rank by the model's choice "
        "(TALENT_LLM_SCORING=choice or auto), or answer with --decode free")


def forced_reader(expected: str) -> Callable[[dict[str, Any]], JobResult]:
    """Reads a forced request's reply: the one generated token (which must be the forced
    one: a server that ignores ``logit_bias`` is an error) and its top list."""

    def read(choice: dict[str, Any]) -> JobResult:
        lp = choice.get("logprobs")
        if not isinstance(lp, dict):
            raise _no_logprobs()
        tokens, values = lp.get("tokens"), lp.get("token_logprobs")
        tops = lp.get("top_logprobs") or [{}]
        if not (isinstance(tokens, list) and isinstance(values, list) and tokens and values
                and isinstance(values[0], int | float) and isinstance(tops[0], dict | None)):
            raise _malformed(lp)
        if tokens[0].strip() != expected.strip():
            raise LogprobsUnavailable(f"the server generated {tokens[0]!r} where logit_bias "
                                      f"forced {expected!r}: it ignores logit_bias; set "
                                      "TALENT_LLM_SCORING=echo (or choice)")
        return float(values[0]), {str(k): float(v) for k, v in (tops[0] or {}).items()}

    return read


def forced_jobs(tokenizer: Any, prompt: str, names: Sequence[str]) -> Plan:
    """The forced way (module doc) for ``names``; echo for a name that cannot be split."""
    inputs = scoring_inputs(tokenizer, prompt, names)
    sep = [i for i in inputs.end_ids if i != tokenizer.eos_token_id]
    if not sep:  # "|" is no single token: nothing to force at the end
        return echo_jobs(tokenizer, prompt, names)
    bar, eos_text = sep[0], tokenizer.decode([tokenizer.eos_token_id])
    jobs: dict[Job, None] = {}
    combine: dict[str, Callable[[dict[Job, JobResult]], float]] = {}
    echo_names = []
    for name, ids in zip(inputs.names, inputs.continuations, strict=True):
        prefixes = [tokenizer.decode(ids[:j]) for j in range(len(ids) + 1)]
        # text can only be sent in whole characters: a character split over tokens is
        # forced as one run of those tokens (`_forced_run`)
        cuts = [0, *(j for j in range(1, len(ids) + 1) if "\ufffd" not in prefixes[j])]
        if cuts[-1] != len(ids) or not prefixes[-1]:
            echo_names.append(name)
            continue
        steps = [_forced(prompt + prefixes[a], ids[a], tokenizer.decode([ids[a]]), 1)
                 if b - a == 1 else
                 _forced_run(prompt + prefixes[a], ids[a:b], tokenizer.decode(ids[a:b]))
                 for a, b in zip(cuts, cuts[1:], strict=False)]
        ends = [_forced(prompt + prefixes[-1], bar, tokenizer.decode([bar]), k) for k in TOP_K]
        for job in (*steps, *ends):
            jobs.setdefault(job)

        def total(results: dict[Job, JobResult], steps=steps, ends=ends) -> float:
            p_bar = results[ends[0]][0]
            eos = next((v for top in (results[e][1] for e in ends)
                        for v in (top.get(eos_text, top.get("")),) if v is not None), None)
            tail = p_bar if eos is None else _logsumexp([p_bar, eos])
            return sum(results[s][0] for s in steps) + tail

        combine[name] = total
    if echo_names:
        rest = echo_jobs(tokenizer, prompt, echo_names)
        jobs.update(dict.fromkeys(rest.jobs))
        combine.update(rest.combine)
    return Plan(list(jobs), combine)


def _forced_run(text: str, ids: Sequence[int], expected: str) -> Job:
    """The tokens ``ids`` of one character, forced together: all of them biased, as many
    generated; their log-probabilities summed when the server wrote them in order (its text
    is the character), else the name scores as impossible (the model would not write it)."""

    def read(choice: dict[str, Any]) -> JobResult:
        lp = choice.get("logprobs")
        if not isinstance(lp, dict):
            raise _no_logprobs()
        values = lp.get("token_logprobs")
        if not (isinstance(values, list) and len(values) == len(ids)
                and all(isinstance(v, int | float) for v in values)):
            raise _malformed(lp)
        if choice.get("text") != expected:
            log.warning("forced scoring: the server wrote %r for the tokens of %r",
                        choice.get("text"), expected)
            return IMPOSSIBLE, {}
        return float(sum(values)), {}

    return Job((("prompt", text), ("max_tokens", len(ids)), ("temperature", 0.0),
                ("logprobs", 1), ("logit_bias", tuple((str(i), FORCE) for i in sorted(set(ids))))),
               read)


def _forced(text: str, token: int, token_text: str, top: int) -> Job:
    return Job((("prompt", text), ("max_tokens", 1), ("temperature", 0.0), ("logprobs", top),
                ("logit_bias", ((str(token), FORCE),))), forced_reader(token_text))


def echo_jobs(tokenizer: Any, prompt: str, names: Sequence[str]) -> Plan:
    """The echo way (module doc): each name followed by each end, prompt log-probabilities
    echoed, the two sums combined with logsumexp."""
    inputs = scoring_inputs(tokenizer, prompt, names)
    ends = [tokenizer.decode([i]) for i in inputs.end_ids]
    special = set(tokenizer.all_special_tokens)
    jobs: list[Job] = []
    combine: dict[str, Callable[[dict[Job, JobResult]], float]] = {}
    for name in inputs.names:
        mine = []
        for end in ends:
            targets = (name + end, name) if end in special else (name + end,)
            job = Job((("prompt", prompt + name + end), ("echo", True), ("logprobs", 0),
                       ("max_tokens", 1), ("temperature", 0.0)),
                      _echo_reader(prompt, targets))
            jobs.append(job)
            mine.append(job)
        combine[name] = lambda results, mine=mine: _logsumexp([results[j][0] for j in mine])
    return Plan(jobs, combine)


def _echo_reader(prompt: str, targets: tuple[str, ...]) -> Callable[[dict[str, Any]], JobResult]:
    def read(choice: dict[str, Any]) -> JobResult:
        generated = (choice.get("usage") or {}).get("completion_tokens")
        return continuation_logprob(choice, prompt, targets,
                                    int(generated) if generated is not None else 1), {}

    return read


def continuation_logprob(choice: dict[str, Any], prompt: str, targets: Sequence[str],
                         generated: int) -> float:
    """The sum of the echoed log-probabilities of the last tokens of the text sent, those
    that spell one of ``targets`` (the name and its end: "Tom Hanks|", or "Tom Hanks" when
    the end-of-turn token is echoed as ""), after dropping the ``generated`` tokens the
    server appended. Matched on the tokens' text from the end, not on ``text_offset``:
    llama-cpp-python's offsets leave out the special tokens it drops (BOS)."""
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        raise _no_logprobs()
    values, tokens = lp.get("token_logprobs"), lp.get("tokens")
    if not (isinstance(values, list) and isinstance(tokens, list)
            and len(values) == len(tokens) and len(tokens) > generated
            and all(isinstance(t, str) for t in tokens)):
        raise _malformed(lp)
    tokens, values = tokens[:len(tokens) - generated], values[:len(values) - generated]
    spelled, longest = "", max(len(t) for t in targets)
    space = prompt[len(prompt.rstrip()):]  # a prompt's trailing space may join the name
    for j in range(len(tokens) - 1, -1, -1):
        spelled = tokens[j] + spelled
        if spelled in targets or (space and spelled.startswith(space)
                                  and spelled[len(space):] in targets):
            if any(v is None for v in values[j:]):
                raise LogprobsUnavailable("the server echoed no log-probability for a prompt "
                                          "token: ranked decoding needs them (--decode free "
                                          "does not)")
            return float(sum(values[j:]))
        if len(spelled) > longest + len(space):
            break
    raise LogprobsUnavailable(f"the server's echoed tokens do not end with the candidate "
                              f"{targets[0]!r} (echo=true unsupported?): ranked decoding "
                              "needs them; or answer with --decode free")
