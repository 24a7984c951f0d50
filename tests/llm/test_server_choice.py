"""Ranking by the model's choice (talent_core/llm/server_choice.py) and the openai backend's
switch to it when a server gives no log-probabilities (TALENT_LLM_SCORING=auto). The same
against a real llama.cpp server: tests/e2e/test_server_backend_slow.py."""

from __future__ import annotations

import pytest

from talent_core.config import Settings
from talent_core.errors import LLMServerError, LogprobsUnavailable
from talent_core.llm.ranking import select_top
from talent_core.llm.server_choice import (
    choice_body,
    choice_scores,
    ground,
    read_choice,
    schema,
)

NAMES = ["Christopher Nolan", "Emma Thomas", "Inception"]


def test_schema_allows_only_the_candidates_numbers():
    s = schema(3)
    assert s["properties"]["answers"]["items"]["enum"] == [1, 2, 3]
    assert s["required"] == ["answers"] and s["additionalProperties"] is False


def test_body_numbers_the_names_in_the_user_turn_per_format():
    b = choice_body("SYS", "who directed [Inception]?", NAMES, "json_schema")
    assert b["messages"][0] == {"role": "system", "content": "SYS"}
    user = b["messages"][1]["content"]
    assert user.startswith("who directed [Inception]?") and "2. Emma Thomas" in user
    assert b["response_format"]["type"] == "json_schema"
    assert b["response_format"]["json_schema"]["schema"] == schema(3)
    assert choice_body("S", "U", NAMES, "json_object")["response_format"] == {
        "type": "json_object", "schema": schema(3)}
    assert "response_format" not in choice_body("S", "U", NAMES, "none")
    assert b["temperature"] == 0.0


def test_read_choice_json_cut_and_free_text():
    assert read_choice('{"answers": [3, 1, 3]}', NAMES) == (["Inception", "Christopher Nolan"],
                                                             True)
    assert read_choice('{"answers": [9]}', NAMES) == ([], True)  # out of range: dropped
    # the schema's JSON cut off by max_tokens: the numbers before the cut
    assert read_choice('{ "answers": [2, 1, 2', NAMES) == (["Emma Thomas", "Christopher Nolan"],
                                                            True)
    # not JSON: the answer line grounded in the names (exact, then the closest spelling)
    assert read_choice("christopher nolan | Emma Tomas", NAMES) == (
        ["Christopher Nolan", "Emma Thomas"], False)
    assert ground("Steven Spielberg", NAMES) == []


def test_scores_keep_the_chosen_and_only_the_first_else():
    scored = choice_scores(NAMES, ["Inception", "Emma Thomas"])
    top = select_top(scored, margin=4.0)
    assert [s.name for s in top] == ["Inception", "Emma Thomas"]
    # nothing chosen: one name (the first), never the whole list
    assert [s.name for s in select_top(choice_scores(NAMES, []), margin=4.0)] == [NAMES[0]]


class FakeClient:
    """The ServerClient calls ServerLM makes, scripted."""

    base_url = "http://fake/v1"

    def __init__(self, completion, chat):
        self._completion, self._chat = completion, chat
        self.chats: list[dict] = []
        self.completions = 0

    def models(self):
        return ["base"]

    def completion(self, body):
        self.completions += 1
        return self._completion(body)

    def chat(self, body):
        self.chats.append(body)
        return self._chat(body), False

    def _fail(self, what):
        return LLMServerError(what)


def _lm(tiny_dir, tmp_path, client, scoring="auto"):
    from talent_core.llm.server import ServerLM

    s = Settings(_env_file=None, llm_backend="openai", llm_base_url="http://fake/v1",
                 llm_tokenizer=str(tiny_dir), model_cache_dir=tmp_path, llm_scoring=scoring,
                 llm_concurrency=1)
    return ServerLM(None, s, client=client)


def _no_logprobs(body):
    return {"text": "x", "logprobs": None}


def test_auto_switches_to_choice_on_a_server_without_logprobs(tiny_dir, tmp_path):
    client = FakeClient(_no_logprobs, lambda body: '{"answers": [2]}')
    lm = _lm(tiny_dir, tmp_path, client)
    assert lm.ranking == "logprobs"
    scored = lm.score("PROMPT", None, NAMES, chat=("SYS", "USER"))
    assert lm.ranking == "choice"
    assert max(scored, key=lambda s: s.score).name == "Emma Thomas"
    assert client.chats[0]["messages"][0]["content"] == "SYS"
    assert client.chats[0]["model"] == "base"
    n = client.completions
    lm.score("PROMPT", None, NAMES, chat=("SYS", "USER"))
    assert client.completions == n  # decided once: no more /completions tries


def test_forced_says_why_instead_of_switching(tiny_dir, tmp_path):
    lm = _lm(tiny_dir, tmp_path, FakeClient(_no_logprobs, lambda b: "{}"), scoring="forced")
    with pytest.raises(LogprobsUnavailable, match="no log-probabilities.*choice"):
        lm.score("PROMPT", None, NAMES)


def test_a_chat_only_server_404_on_completions_switches_too(tiny_dir, tmp_path):
    def missing(body):
        raise LLMServerError("language-model server http://fake/v1: HTTP 404: Not Found", 404)

    lm = _lm(tiny_dir, tmp_path, FakeClient(missing, lambda b: '{"answers": [1]}'))
    assert max(lm.score("P", None, NAMES), key=lambda s: s.score).name == NAMES[0]


def test_refused_response_formats_move_to_the_next_for_good(tiny_dir, tmp_path):
    def chat(body):
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema":
            raise LLMServerError("HTTP 422: response_format: Input should be 'text' or "
                                 "'json_object'", 422)
        if fmt == "json_object":
            raise LLMServerError("HTTP 400: unsupported parameter", 400)
        return "The answer: emma thomas"  # no structured output at all: free text

    client = FakeClient(_no_logprobs, chat)
    lm = _lm(tiny_dir, tmp_path, client, scoring="choice")
    scored = lm.score("P", None, NAMES, chat=("S", "U"))
    assert max(scored, key=lambda s: s.score).name == "Emma Thomas"
    assert client.completions == 0  # choice: no log-probabilities asked for
    assert [(c.get("response_format") or {}).get("type") for c in client.chats] == [
        "json_schema", "json_object", None]
    lm.score("P", None, NAMES, chat=("S", "U"))
    assert (client.chats[-1].get("response_format") or {}).get("type") is None


def test_free_decoding_on_a_chat_only_server(tiny_dir, tmp_path):
    def missing(body):
        raise LLMServerError("language-model server http://fake/v1: HTTP 404: Not Found", 404)

    client = FakeClient(missing, lambda b: "emma thomas")
    lm = _lm(tiny_dir, tmp_path, client)
    gen = lm.generate("PROMPT", None, 32, chat=("SYS", "USER"))
    assert gen.text == "emma thomas" and not gen.truncated
    assert client.chats[0]["messages"] == [{"role": "system", "content": "SYS"},
                                           {"role": "user", "content": "USER"}]
    n = client.completions
    lm.generate("PROMPT", None, 32, chat=("SYS", "USER"))
    assert client.completions == n  # /completions not tried again
    with pytest.raises(LLMServerError, match="404"):  # no turns to send: the error stands
        _lm(tiny_dir, tmp_path, FakeClient(missing, None)).generate("PROMPT", None, 32)


def test_concurrent_refusals_of_one_format_skip_only_it(tiny_dir, tmp_path):
    """Two asks refused on json_schema at once move on to json_object, not past it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    both = threading.Barrier(2, timeout=10)

    def chat(body):
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema":
            both.wait()  # both requests are in flight before either is refused
            raise LLMServerError("HTTP 400: unsupported response_format", 400)
        return '{"answers": [1]}'

    client = FakeClient(_no_logprobs, chat)
    lm = _lm(tiny_dir, tmp_path, client, scoring="choice")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: lm.score("P", None, NAMES, chat=("S", "U")), range(2)))
    lm.score("P", None, NAMES, chat=("S", "U"))
    assert (client.chats[-1].get("response_format") or {}).get("type") == "json_object"


def test_other_server_errors_are_not_taken_for_a_refusal(tiny_dir, tmp_path):
    def chat(body):
        raise LLMServerError("HTTP 503: overloaded", 503)

    lm = _lm(tiny_dir, tmp_path, FakeClient(_no_logprobs, chat), scoring="choice")
    with pytest.raises(LLMServerError, match="503"):
        lm.score("P", None, NAMES)

