"""`talent serve`: the HTTP API (talent_core/api) under uvicorn. FastAPI and the pipeline are
imported when the command runs: `talent --help` imports this module."""

from __future__ import annotations

from typing import Annotated

import typer

from talent_core.commands.console import setup_logging
from talent_core.config import get_settings


def serve(
    host: Annotated[str | None, typer.Option(
        "--host", help="address to bind (default TALENT_API_HOST, 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", min=1, max=65535, help="port (default TALENT_API_PORT, 8765)")] = None,
    preload: Annotated[bool | None, typer.Option(
        "--preload/--no-preload", help="load the models (and the query embedder) at startup, "
        "not on the first ask "
        "(default TALENT_API_PRELOAD)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="INFO logs")] = False,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs): ask, retrieve, browse, load. Every
    request but /healthz needs an API key (`talent keys create`)."""
    import uvicorn

    from talent_core.api.app import create_app

    setup_logging(verbose)
    s = get_settings()
    if preload is not None:
        s = s.model_copy(update={"api_preload": preload})
    host, port = host or s.api_host, port or s.api_port
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: listening on {host}, not only this machine: anyone who can reach "
                   "it may try keys; put TLS in front of it", err=True)
    app = create_app(s, announce=(host, port))
    typer.echo(f"talent serve: http://{host}:{port} (docs: /docs; store: {s.data_dir})",
               err=True)
    uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning",
                timeout_graceful_shutdown=5)
