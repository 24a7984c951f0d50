"""The openai backend's HTTP client (talent_core/llm/server.py) against a scripted HTTP server:
retries, time-outs and one clear line per fault. The same backend against a real
OpenAI-compatible server (llama.cpp): test_server_backend.py."""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import pytest

from talent_core.errors import LLMServerError
from talent_core.llm.server import ServerClient
from talent_core.llm.server_scoring import continuation_logprob


class Script:
    """What the fake server answers: a list of (status, body or None = hang, delay)."""

    def __init__(self):
        self.replies: list[tuple[int, object, float]] = []
        self.seen: list[tuple[str, str, dict | None, str | None]] = []


@pytest.fixture
def fake():
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            script.seen.append((method, self.path, body, self.headers.get("Authorization")))
            status, payload, delay = script.replies.pop(0) if script.replies else (
                200, {"data": [{"id": "m1"}]}, 0.0)
            time.sleep(delay)
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            try:
                self.wfile.write(raw)
            except BrokenPipeError:  # the client gave up (the time-out test)
                pass

        def do_GET(self):
            self._reply("GET")

        def do_POST(self):
            self._reply("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield script
    server.shutdown()
    server.server_close()


def client(url, **kw):
    return ServerClient(url, kw.pop("api_key", None), kw.pop("timeout", 5.0),
                        kw.pop("retries", 2), backoff=0.01)


def test_models_and_the_key_as_a_bearer_token(fake):
    fake.replies = [(200, {"object": "list", "data": [{"id": "a"}, {"id": "b"}]}, 0)]
    assert client(fake.url, api_key="sk-secret").models() == ["a", "b"]
    assert fake.seen[0][:2] == ("GET", "/v1/models") and fake.seen[0][3] == "Bearer sk-secret"


def test_5xx_and_429_are_retried_then_answered(fake):
    fake.replies = [(503, {"error": "warming up"}, 0), (429, {"error": "busy"}, 0),
                    (200, {"choices": [{"text": "ok"}]}, 0)]
    assert client(fake.url).completion({"model": "m1", "prompt": "x"})["text"] == "ok"
    assert len(fake.seen) == 3


def test_5xx_after_the_last_retry_is_one_line_with_the_reason(fake):
    fake.replies = [(500, {"error": {"message": "CUDA out of memory"}}, 0)] * 2
    with pytest.raises(LLMServerError, match=r"HTTP 500: CUDA out of memory") as e:
        client(fake.url, retries=1).completion({"model": "m1", "prompt": "x"})
    assert "\n" not in str(e.value) and fake.url in str(e.value)


def test_4xx_is_not_retried(fake):
    fake.replies = [(400, {"error": {"message": "max_tokens must be at least 1"}}, 0)]
    with pytest.raises(LLMServerError, match="HTTP 400: max_tokens must be at least 1"):
        client(fake.url).completion({"model": "m1", "prompt": "x"})
    assert len(fake.seen) == 1


def test_refused_key(fake):
    fake.replies = [(401, {"error": {"message": "invalid api key sk-..."}}, 0)]
    with pytest.raises(LLMServerError, match="API key was refused") as e:
        client(fake.url, api_key="sk-secret").models()
    assert "sk-secret" not in str(e.value)


def test_unknown_model_names_what_it_serves(fake):
    fake.replies = [(404, {"error": {"message": "The model `nope` does not exist."}}, 0),
                    (200, {"data": [{"id": "m1"}, {"id": "retriever"}]}, 0)]
    with pytest.raises(LLMServerError, match=r"does not serve the model 'nope' \(it serves: "
                                             r"m1, retriever\)"):
        client(fake.url).completion({"model": "nope", "prompt": "x"})


@pytest.mark.parametrize("payload, problem", [
    (b"<html>not found</html>", "not JSON"),
    ([1, 2], "not an object"),
    ({"id": "x"}, "no choices"),
])
def test_malformed_replies(fake, payload, problem):
    fake.replies = [(200, payload, 0)]
    with pytest.raises(LLMServerError, match=problem):
        client(fake.url).completion({"model": "m1", "prompt": "x"})


def test_a_slow_server_times_out_after_the_retries(fake):
    fake.replies = [(200, {"choices": [{"text": "late"}]}, 1.0)] * 2
    t = time.monotonic()
    with pytest.raises(LLMServerError, match=r"no answer within 0.2s"):
        client(fake.url, timeout=0.2, retries=1).completion({"model": "m1", "prompt": "x"})
    assert time.monotonic() - t < 5


def test_nobody_listening():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a port nobody listens on
    with pytest.raises(LLMServerError, match="cannot connect .* is it running"):
        client(f"http://127.0.0.1:{port}/v1", retries=1).models()


def test_continuation_logprob_reads_the_name_and_its_end_from_the_tokens():
    prompt = "<|im_start|>Q: who? A:"
    # as llama-cpp-python echoes: the BOS-valued token dropped, then one generated token
    toks = ["Q", ":", " who", "?", " A", ":", " Tom", " Hanks", "|", "\n"]
    values = [None, -1.0, -2.0, -0.5, -0.1, -0.2, -3.0, -0.25, -1.5, -0.7]
    choice = {"logprobs": {"tokens": toks, "token_logprobs": values}}
    assert continuation_logprob(choice, prompt, (" Tom Hanks|",), 1) == pytest.approx(-4.75)
    # the end-of-turn token echoed as "": the name alone spells it
    eos = {"logprobs": {"tokens": toks[:8] + [""], "token_logprobs": values[:8] + [-0.9]}}
    assert continuation_logprob(eos, prompt, (" Tom Hanks<|im_end|>", " Tom Hanks"), 0
                                ) == pytest.approx(-4.15)
    # a name whose last character merged with "|" into one token
    merged = {"logprobs": {"tokens": ["A", ":", " (", "1979", ")|"],
                           "token_logprobs": [None, -1.0, -0.5, -2.0, -0.3]}}
    assert continuation_logprob(merged, "A:", (" (1979)|",), 0) == pytest.approx(-2.8)
    with pytest.raises(LLMServerError, match="no log-probabilities"):
        continuation_logprob({"text": "x"}, "", ("x",), 1)
    bad = {"logprobs": {"tokens": toks, "token_logprobs": values[:3]}}
    with pytest.raises(LLMServerError, match="malformed"):
        continuation_logprob(bad, prompt, (" Tom Hanks|",), 1)
    with pytest.raises(LLMServerError, match="do not end with the candidate"):
        continuation_logprob(choice, prompt, (" Meg Ryan|",), 1)


def test_forced_jobs_share_prefixes_and_add_the_end(tiny_tok):
    """Each name: one forced request per token, one forcing "|" (p(EOS) from its top
    list); a request two names share is sent once; the score sums them."""
    from talent_core.llm.server_scoring import forced_jobs

    names = ["tom hanks", "tom cruise"]
    plan = forced_jobs(tiny_tok, "P:", names)
    ids = {n: tiny_tok(n, add_special_tokens=False)["input_ids"] for n in names}
    shared = sum(1 for a, b in zip(ids[names[0]], ids[names[1]], strict=False) if a == b)
    assert len(plan.jobs) == sum(len(v) + 2 for v in ids.values()) - shared
    assert all(j.body["max_tokens"] == 1 and len(j.body["logit_bias"]) == 1 for j in plan.jobs)
    eos = tiny_tok.decode([tiny_tok.eos_token_id])
    results = {j: (-1.0, {eos: -2.0} if j.body["logprobs"] == 100 else {}) for j in plan.jobs}
    n = len(ids["tom hanks"])
    assert plan.score("tom hanks", results) == pytest.approx(
        -n + math.log(math.exp(-1.0) + math.exp(-2.0)))
    # EOS in the top 20: that value, not the top 100's (llama-cpp's "" may be another token)
    results.update({j: (-1.0, {"": -1.5}) for j in plan.jobs if j.body["logprobs"] == 20})
    assert plan.score("tom hanks", results) == pytest.approx(
        -n + math.log(math.exp(-1.0) + math.exp(-1.5)))
    body = plan.jobs[0].body
    assert body["prompt"] == "P:" and body["logit_bias"] == {str(ids["tom hanks"][0]): 100.0}


def test_forced_reader_refuses_a_server_that_ignores_logit_bias():
    from talent_core.llm.server_scoring import forced_reader

    read = forced_reader(" Scott")
    ok = {"logprobs": {"tokens": [" Scott"], "token_logprobs": [-2.3],
                       "top_logprobs": [{" Ash": -2.6}]}}
    assert read(ok) == (-2.3, {" Ash": -2.6})
    with pytest.raises(LLMServerError, match="ignores logit_bias"):
        read({"logprobs": {"tokens": [" Ash"], "token_logprobs": [-2.6], "top_logprobs": [{}]}})


def test_server_lm_picks_the_base_model_and_the_served_adapters(fake, tiny_dir, tmp_path):
    """The base model: the one listed that is no adapter's; a role's adapter: the model of
    its name where served (its metadata from the local directory), else frozen."""
    from talent_core.config import Settings
    from talent_core.llm.server import ServerLM

    base = Settings(_env_file=None, llm_backend="openai", llm_base_url=fake.url,
                    llm_tokenizer=str(tiny_dir), model_cache_dir=tmp_path)
    adapters = {"retriever": tmp_path / "r", "generator": tmp_path / "g"}
    fake.replies = [(200, {"data": [{"id": "base-7b"}, {"id": "retriever"}]}, 0)]
    with mock.patch("talent_core.llm.server.read_meta", return_value="meta"):
        lm = ServerLM(adapters, base)
    assert lm.models == {None: "base-7b", "retriever": "retriever"}
    assert set(lm.metas) == {"retriever"}  # the generator runs the base model, frozen
    assert lm.describe(None) == f"base-7b @ {fake.url}"
    fake.replies = [(200, {"data": [{"id": "a"}, {"id": "b"}]}, 0)]
    with pytest.raises(LLMServerError, match="serves 2 models .*TALENT_LLM_MODEL"):
        ServerLM(None, base)
    fake.replies = [(200, {"data": [{"id": "a"}, {"id": "b"}]}, 0)]
    assert ServerLM(None, base.model_copy(update={"llm_model": "b"})).models == {None: "b"}


def test_a_character_split_over_tokens_is_forced_as_one_run():
    """"Ñ" is two byte tokens: no text can be sent between them, so both are forced in one
    request and their log-probabilities summed when the server wrote them in order."""
    from talent_core.llm.server_scoring import IMPOSSIBLE, _forced_run

    job = _forced_run("Acosta ", [235, 5549], "Ñ")
    body = job.body
    assert body["max_tokens"] == 2 and body["logit_bias"] == {"235": 100.0, "5549": 100.0}
    lp = {"tokens": ["", ""], "token_logprobs": [-5.5, -5.7], "top_logprobs": [{}, {}]}
    assert job.read({"text": "Ñ", "logprobs": lp})[0] == pytest.approx(-11.2)
    assert job.read({"text": "ÑÑ"[:1] + "x", "logprobs": lp})[0] == IMPOSSIBLE
    with pytest.raises(LLMServerError, match="malformed"):
        job.read({"text": "Ñ", "logprobs": {"tokens": [""], "token_logprobs": [-1.0]}})
