"""`talent app`, `talent demo` and `talent prepare`: the Streamlit UI, the bundled sample KG,
and the models' one-time preparation."""

from __future__ import annotations

import json as _json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from talent_core import ui
from talent_core.commands.console import setup_logging
from talent_core.config import DEMO_DIR, get_settings

DEMO_KG = DEMO_DIR / "kb.txt.gz"  # CC BY 3.0
UI_MAIN = Path(ui.__file__).resolve().parent / "main.py"  # Streamlit runs it by path


def run_app(
    port: Annotated[int, typer.Option(help="port")] = 8501,
    address: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
) -> None:
    """Start the Streamlit UI (uploads up to TALENT_MAX_UPLOAD_MB)."""
    cmd = [sys.executable, "-m", "streamlit", "run", str(UI_MAIN),
           "--server.port", str(port), "--server.address", address,
           "--server.maxUploadSize", str(get_settings().max_upload_mb),
           "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal"]
    sys.stdout.flush()
    sys.stderr.flush()
    # Streamlit replaces this process: Ctrl-C or a supervisor's SIGTERM reaches it (as a
    # child it kept serving after the `talent app` that started it was terminated)
    os.execv(cmd[0], cmd)


def demo(
    port: Annotated[int, typer.Option(help="port")] = 8501,
    address: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    no_app: Annotated[
        bool, typer.Option("--no-app", help="load only; do not start the UI")
    ] = False,
) -> None:
    """Load the bundled MetaQA KB (movies; CC BY 3.0) if the store is empty, its graph
    first and its names' vectors behind the UI (`talent vectors` in the background), prepare
    the language models (one-time conversion of the base model), then start the UI."""
    from talent_core.loaders.api import load_path
    from talent_core.loaders.vectors import fill_in_background, vectors_left
    from talent_core.store import open_store

    setup_logging(True)
    settings = get_settings()
    store = open_store(settings)
    try:
        if store.stats().triples == 0:
            typer.echo(f"loading the bundled MetaQA KB ({DEMO_KG.name}, 133,582 triples) "
                       "without its names' vectors: they are embedded behind the UI ...")
            report = load_path(str(DEMO_KG), "metaqa", store=store, progress=True,
                               vectors="later")
            typer.echo(f"loaded: {report.loaded:,} triples in {report.seconds:.0f} s")
        typer.echo(_json.dumps(store.stats().model_dump()))
        left, entities = vectors_left(store)
    finally:
        store.close()
    if left:
        pid, logfile = fill_in_background(settings)
        typer.echo(f"embedding {left:,} of {entities:,} names behind the UI (pid {pid}, log "
                   f"{logfile}; 2-3 minutes on 2 cores): answers meanwhile are the same, "
                   "a little slower")
    prepare_models()
    if not no_app:
        run_app(port=port, address=address)


def prepare_models() -> None:
    """Convert the default base model once (GGUF -> safetensors, cached) so that no question
    waits for it, and say which adapters will answer (make install runs this)."""
    from talent_core.llm.models import resolve_base_model
    from talent_core.pipeline import resolve_adapters

    s = get_settings()
    typer.echo(f"preparing base model {s.base_model!r} (converted once, then cached) ...")
    path = resolve_base_model(s.base_model, s.model_cache_dir)
    r, g = resolve_adapters(s.adapters, s.base_model)
    typer.echo(f"base model ready: {path}; retriever adapter: {r or 'none (frozen)'}; "
               f"generator adapter: {g or 'none (frozen)'}")


