"""`talent server start|stop|status`: the embedded FalkorDB server of TALENT_DATA_DIR. The
server module is imported when a command runs: `talent --help` imports this module."""

from __future__ import annotations

import json as _json
from typing import Annotated

import typer

from talent_core.commands.console import fail
from talent_core.config import get_settings
from talent_core.text import printable

server_app = typer.Typer(no_args_is_help=True, help=(
    "The embedded FalkorDB server. A command that needs it starts it and leaves it running "
    "(the next command skips the start); it stops by itself after "
    "TALENT_SERVER_IDLE_TIMEOUT seconds without a client (default 1800; 0: it stops with "
    "the command that started it)."))


def _server_status(srv, json_out: bool) -> None:
    from talent_core.store.falkordb_client import status_text

    st = srv.status()
    typer.echo(_json.dumps(st) if json_out else printable(status_text(st)))


StatusJson = Annotated[bool, typer.Option("--json", help="print JSON")]


@server_app.command("start")
def server_start(
    idle_timeout: Annotated[float | None, typer.Option(
        "--idle-timeout", min=0, help="stop after this many seconds without a client "
        "(default: run until `talent server stop`)")] = None,
    json: StatusJson = False,
) -> None:
    """Start the embedded server and leave it running (commands then reuse it)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    s = get_settings_()
    srv = EmbeddedServer.for_dir(s.data_dir)
    if idle_timeout:
        srv.idle_timeout = idle_timeout
    else:
        srv.keep_alive = True
    srv.ensure_running()
    _server_status(srv, json)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded server now, cleanly (AOF compacted)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    srv = EmbeddedServer.for_dir(get_settings_().data_dir)
    typer.echo(_json.dumps({"stopped": srv.shutdown(), "data_dir": str(srv.data_dir)}))


@server_app.command("status")
def server_status(json: StatusJson = False) -> None:
    """Where the store of TALENT_DATA_DIR is, and whether its server runs (pid, since
    when, when it stops)."""
    from talent_core.store.falkordb_server import EmbeddedServer

    _server_status(EmbeddedServer.for_dir(get_settings_().data_dir), json)


def get_settings_():
    """The settings, if they name the embedded store (else exit 2)."""
    s = get_settings()
    if s.store != "embedded":
        raise fail("TALENT_STORE is not 'embedded': there is no embedded server to manage")
    return s

