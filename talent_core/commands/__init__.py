"""`talent`: the one CLI. The UI and the evaluation call the same Pipeline.

  talent load PATH --format ...     bulk load (loaders/)
  talent stats [--json]
  talent vectors                    embed what `load --vectors later` left (demo: behind the UI)
  talent sources [--json]           the loads a store holds (--collisions: shared names)
  talent unload SOURCE              remove one load (load FILE --replace SOURCE: replace it)
  talent retrieve "Q" [--json]      candidate subgraph S; or --questions FILE for many
  talent ask "Q" [--retriever DIR] [--generator DIR] [--no-retriever] [--json]
  talent train retriever|generator  LoRA training (talent_core/llm)
  talent examples FILE              candidate subgraphs + gold answers -> training JSONL
  talent eval FILE                  retrieval and QA metrics over a question file
  talent eval FILE... --report DIR  every method / LLM mode / sweep point: report.md, plots
  talent app | demo                 the Streamlit UI (demo: load the bundled sample KG first)
  talent export --neo4j-import DIR  the store as neo4j-admin bulk-import CSVs + import.sh
  talent serve [--host H --port P]  the HTTP API (talent_core/api); `talent keys` its keys
"""

# The commands live in this package, one module per group; this module builds the `talent`
# app from them. The `train` group and `annotate-explagraphs` import torch / transformers
# (seconds), so they are imported only when they run (`_LazyGroup`): `talent --help` and
# every other command stay fast.

from __future__ import annotations

from typing import Any

import click
import typer
from typer.core import TyperGroup

from talent_core.commands.ask import ask, examples, retrieve
from talent_core.commands.console import fail_with
from talent_core.commands.evaluate import eval_cmd
from talent_core.commands.keys import keys_app
from talent_core.commands.load import export_cmd, load, stats, vectors_cmd
from talent_core.commands.serve import serve
from talent_core.commands.server import server_app
from talent_core.commands.sources import sources
from talent_core.commands.ui import demo, prepare_models, run_app
from talent_core.commands.unload import unload
from talent_core.errors import TalentError

# name -> (builder, short help) of the commands built when they run
TRAIN_HELP = "LoRA training of the LLM retriever / generator; SubgraphRAG's triple scorer."
ANNOTATE_HELP = "Pseudo-gold reasoning nodes for ExplaGraphs with an LLM (paper Appendix A.2)."


def _train_app() -> typer.Typer:
    from talent_core.commands import train  # torch / transformers: only when it runs

    train_app = typer.Typer(no_args_is_help=True, help=TRAIN_HELP, add_completion=False)
    train_app.command("retriever")(train.train_retriever)
    train_app.command("generator")(train.train_generator)
    train_app.command("tune-ranking")(train.tune_ranking)
    train_app.command("subgraphrag")(train.train_subgraphrag)
    train_app.command("planner")(train.train_planner)
    return train_app


def _annotate_app() -> typer.Typer:
    from talent_core.commands import train  # torch / transformers: only when it runs

    one = typer.Typer(add_completion=False)
    one.command("annotate-explagraphs")(train.annotate_explagraphs)
    return one


LAZY = {"train": (_train_app, TRAIN_HELP), "annotate-explagraphs": (_annotate_app, ANNOTATE_HELP)}


class _LazyGroup(TyperGroup):
    """The `talent` group: LAZY commands are built when they are invoked (or their own help
    is asked); listing them in `talent --help` shows a stub with their short help."""

    _resolving = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *LAZY]

    def resolve_command(self, ctx: click.Context, args: list[str]):
        self._resolving = True
        try:
            return super().resolve_command(ctx, args)
        finally:
            self._resolving = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LAZY:
            return super().get_command(ctx, cmd_name)
        build, short = LAZY[cmd_name]
        if not self._resolving:
            return click.Command(cmd_name, help=short, short_help=short)
        cmd = typer.main.get_command(build())
        cmd.name = cmd_name
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; TaLenT's own errors (a bad question or file, a refused data dir,
        a planner or scorer that does not fit, ...) are caught here, in one place for every
        command: one escaped error line on stderr and the error's exit code."""
        try:
            return super().invoke(ctx)
        except TalentError as e:
            raise fail_with(e) from None


app = typer.Typer(cls=_LazyGroup, add_completion=False, no_args_is_help=True, help=__doc__)
app.command("load")(load)
app.command("stats")(stats)
app.command("vectors")(vectors_cmd)
app.command("sources")(sources)
app.command("unload")(unload)
app.command()(retrieve)
app.command()(ask)
app.command()(examples)
app.command("eval")(eval_cmd)
app.add_typer(server_app, name="server")
app.command("app")(run_app)
app.command()(demo)
app.command("export")(export_cmd)
app.command("prepare")(prepare_models)
app.command("serve")(serve)
app.add_typer(keys_app, name="keys")
