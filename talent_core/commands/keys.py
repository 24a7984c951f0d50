"""`talent keys create|list|revoke`: the API keys of `talent serve`, stored hashed in the
data dir (talent_core/api/keys.py)."""

from __future__ import annotations

import json as _json
from typing import Annotated

import typer

from talent_core.config import get_settings

keys_app = typer.Typer(no_args_is_help=True, help=(
    "API keys of `talent serve` (sent as 'Authorization: Bearer <key>'): read asks and "
    "browses, write also loads. Stored hashed in the data dir; a key is shown once."))


def _store():
    """The keys of the settings' data dir, once it passed the check every command makes
    (`check_data_dir`: DataDirError when another user controls it)."""
    from talent_core.api.keys import KeyStore
    from talent_core.store.data_dir import check_data_dir

    data_dir = get_settings().data_dir
    check_data_dir(data_dir)
    return KeyStore(data_dir)


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option("--name", help="a name for the key (unique)")],
    scope: Annotated[str, typer.Option("--scope", help="read (ask, browse) or write "
                                       "(also load)")] = "read",
) -> None:
    """Create a key and print it once (the last line of stdout): it is not stored."""
    rec, plain = _store().create(name, scope)
    typer.echo(f"created key {rec.name!r} (id {rec.id}, scope {rec.scope}); it is shown "
               "only now:", err=True)
    typer.echo(plain)


@keys_app.command("list")
def keys_list(json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """The keys (name, id, scope, created); never the keys themselves."""
    keys = _store().keys()
    if json:
        typer.echo(_json.dumps([k.model_dump(exclude={"sha256"}) for k in keys]))
        return
    if not keys:
        typer.echo("no API keys (talent keys create --name NAME --scope read|write)")
    for k in keys:
        typer.echo(f"{k.name}\t{k.id}\t{k.scope}\t{k.created}")


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str | None, typer.Argument(help="the key's exact name or its id")] = None,
    key_id: Annotated[str | None, typer.Option("--id", help="the key with this id")] = None,
    name: Annotated[str | None, typer.Option("--name", help="the key with this name")] = None,
) -> None:
    """Remove a key: requests with it are refused (401) from now on."""
    from talent_core.errors import ApiKeyError

    given = [(v, by) for v, by in ((key, "either"), (key_id, "id"), (name, "name"))
             if v is not None]
    if len(given) != 1:
        raise ApiKeyError("say which key to revoke: its name or id, or one of --id ID, "
                          "--name NAME")
    rec = _store().revoke(*given[0])  # type: ignore[arg-type]
    typer.echo(f"revoked key {rec.name!r} (id {rec.id})")
