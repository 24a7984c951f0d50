"""`talent serve`: the HTTP API (talent_core/api) under uvicorn. FastAPI and the pipeline are
imported when the command runs: `talent --help` imports this module."""

from __future__ import annotations

from pathlib import Path
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
        "in the background, not on the first ask; /readyz says ready once they are "
        "(default TALENT_API_PRELOAD, on)")] = None,
    socket: Annotated[Path | None, typer.Option(
        "--socket", help="serve on this unix socket in the data dir instead of a TCP port, "
        "without API keys, until TALENT_MODEL_SERVER_IDLE_TIMEOUT seconds pass without a "
        "request: the warm model process `talent ask` starts by itself")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="INFO logs")] = False,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs): ask, retrieve, browse, load. Every
    request but /healthz needs an API key (`talent keys create`)."""
    import uvicorn

    from talent_core.api.app import create_app

    setup_logging(verbose)
    s = get_settings()
    if socket is not None:
        if host or port:
            raise typer.BadParameter("--socket serves no TCP port: drop --host / --port")
        _serve_socket(s, socket, verbose)
        return
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


def _serve_socket(settings, path: Path, verbose: bool) -> None:
    """The warm model process (talent_core/api/local.py): the API on a unix socket in the
    data dir, without keys, until idle for TALENT_MODEL_SERVER_IDLE_TIMEOUT seconds."""
    import os
    import socket
    import threading

    import uvicorn

    from talent_core.api import local
    from talent_core.api.app import create_app

    path = local.checked_socket(settings, path)
    settings = local.server_settings(settings)
    app = create_app(settings, local=True)
    os.umask(0o077)  # the socket owner-only (uvicorn's own binding would make it 0666)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="info" if verbose else "warning", timeout_graceful_shutdown=5))
    timeout = settings.model_server_idle_timeout or 900.0
    threading.Thread(target=local.watch_idle, args=(server, app.state.runtime, path, timeout),
                     name="idle-watch", daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        path.unlink(missing_ok=True)
