"""Each fault of the openai backend provoked against real llama.cpp servers (issue 47): what
`talent ask` prints and its exit code.

    TALENT_DATA_DIR=.talent/b/metaqa python bench/backend_faults.py \
        -o bench/results/backend_faults.json

Starts its own llama-cpp-python servers (`make llamacpp`) on free ports: one as the docs
run it (--logits_all true), one with an API key, one without --logits_all.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import write_json_atomic  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*extra: str) -> tuple[subprocess.Popen, str]:
    import httpx

    from talent_core.llm.models import smollm2_gguf

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model",
                             str(smollm2_gguf()), "--model_alias", "smollm2", "--n_ctx", "4096",
                             "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(300):
        try:
            httpx.get(url + "/models", timeout=2, headers={"Authorization": "Bearer k"})
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("llama-cpp server did not start")


def ask(env: dict[str, str], *args: str) -> dict:
    full = {**os.environ, "TALENT_LLM_BACKEND": "openai", "TALENT_MODEL_SERVER_IDLE_TIMEOUT": "0",
            **env}
    t = time.perf_counter()
    r = subprocess.run(["talent", "ask", "who directed [Inception]", "--local", *args],
                       env=full, capture_output=True, text=True, timeout=600)
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    return {"exit": r.returncode, "error": errors, "traceback": "Traceback" in r.stderr,
            "seconds": round(time.perf_counter() - t, 1),
            "env": {k: v for k, v in env.items() if k != "TALENT_LLM_API_KEY"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    good, url = serve("--logits_all", "true")
    keyed, kurl = serve("--logits_all", "true", "--api_key", "the-right-key")
    bare, burl = serve("--logits_all", "false")
    try:
        faults = {
            "nobody at the URL": ask({"TALENT_LLM_BASE_URL":
                                      f"http://127.0.0.1:{free_port()}/v1",
                                      "TALENT_LLM_RETRIES": "1"}),
            "a model it does not serve": ask({"TALENT_LLM_BASE_URL": url,
                                              "TALENT_LLM_MODEL": "llama-70b"}),
            "too slow": ask({"TALENT_LLM_BASE_URL": url, "TALENT_LLM_TIMEOUT": "0.001",
                             "TALENT_LLM_RETRIES": "1"}),
            "HTTP 404 (the URL without /v1)": ask({"TALENT_LLM_BASE_URL":
                                                   url.removesuffix("/v1")}),
            "key refused": ask({"TALENT_LLM_BASE_URL": kurl,
                                "TALENT_LLM_API_KEY": "a-wrong-key"}),
            "no prompt log-probabilities (no --logits_all)": ask(
                {"TALENT_LLM_BASE_URL": burl, "TALENT_LLM_RETRIES": "0"}, "--adapters", "none"),
            "the graph-prompt generator": ask({"TALENT_LLM_BASE_URL": url},
                                              "--generator-type", "graph-prompt"),
        }
        answered = ask({"TALENT_LLM_BASE_URL": kurl, "TALENT_LLM_API_KEY": "the-right-key"},
                       "--adapters", "none")
    finally:
        for p in (good, keyed, bare):
            p.terminate()
    write_json_atomic(args.out, {"command": " ".join(sys.argv), "faults": faults,
                                 "with the right key": answered})
    for name, got in faults.items():
        print(f"{name}: exit {got['exit']}: {got['error']}")
    print("with the right key:", answered["exit"])


if __name__ == "__main__":
    main()
