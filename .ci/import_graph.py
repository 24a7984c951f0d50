"""The import graph of talent_core/, loaders/ and app/ (installed as talent_core.loaders and
talent_core.ui): its cycles, and the imports that point
up from a lower layer to the pipeline or to the commands (CLI / UI).

Module-level, in-function and `if TYPE_CHECKING:` imports all count (read with `ast`,
nothing is imported): a typing-only import is still a dependency of the design. Layers, top
down: app & commands -> evaluation / training -> pipeline -> retrieval / llm / loaders ->
store -> config / errors / models. Usage: `python .ci/import_graph.py [--all] [--edges]`;
exits 1 when there is a cycle or an upward import to the pipeline or the commands (`--all`
also lists every other upward import, as information).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package it installs as (pyproject's package-dir)
PACKAGES = {"talent_core": "talent_core", "loaders": "talent_core.loaders",
            "app": "talent_core.ui", "cypher": "talent_core.cypher"}

# (module-name prefix, layer): the first match wins; a prefix matches the module and the
# modules under it
LAYERS: list[tuple[str, int]] = [
    ("talent_core.ui", 6),  # the Streamlit UI (app/)
    ("talent_core.commands", 6),  # the typer CLI (`talent`)
    ("talent_core.api", 6),  # the HTTP API (`talent serve`)
    ("talent_core.__main__", 6),
    ("talent_core.evaluation", 5),
    ("talent_core.training", 5),
    ("talent_core.pipeline", 4),
    ("talent_core.stance", 4),  # the stance task over the pipeline
    ("talent_core.answer", 4),
    ("talent_core.planning", 4),
    ("talent_core.operators", 4),  # operators over the planned set (after planning)
    ("talent_core.explore", 3),
    ("talent_core.retrieval", 3),
    ("talent_core.llm", 3),
    ("talent_core.loaders", 3),  # loaders/
    ("talent_core.store", 2),
    ("talent_core.questions", 2),
    ("talent_core.text", 2),
    ("talent_core.embedding", 2),
    ("talent_core.embedding_common", 2),
    ("talent_core.embedding_numpy", 2),
    ("talent_core.config", 1),
    ("talent_core.errors", 1),
    ("talent_core.models", 1),
]
DEFAULT_LAYER = 2  # a module not listed above: a library helper
PIPELINE_LAYER = 4
COMMAND_LAYER = 6
NAMES = {6: "commands/UI", 5: "evaluation/training", 4: "pipeline", 3: "retrieval/llm",
         2: "store/helpers", 1: "config/errors/models"}


def layer(mod: str) -> int:
    for prefix, n in LAYERS:
        if mod == prefix or mod.startswith(prefix + "."):
            return n
    return DEFAULT_LAYER


def modules() -> dict[str, Path]:
    """Every module of PACKAGES: dotted name -> file."""
    out: dict[str, Path] = {}
    for folder, pkg in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [pkg, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers of the imports under `if TYPE_CHECKING:`."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = getattr(t, "id", None) or getattr(t, "attr", "")
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        if isinstance(n, (ast.Import, ast.ImportFrom)):
                            lines.add(n.lineno)
    return lines


def imports(mod: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, str]]:
    """(imported project module, line, where: "" at module level, "in function" or
    "typing only") for each import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _type_checking_lines(tree)
    top = {id(n) for n in tree.body}
    for n in tree.body:  # module level includes try/if blocks at the top
        if isinstance(n, (ast.Try, ast.If)):
            top.update(id(s) for s in ast.walk(n))
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        kind = ("typing only" if node.lineno in skip else
                "" if id(node) in top else "in function")
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                sub = f"{base}.{a.name}"
                names.append(sub if sub in known else base)
        for name in names:
            while name and name not in known:  # `import a.b.c` -> the longest known module
                name = name.rpartition(".")[0]
            if name and name != mod and (name, node.lineno, kind) not in out:
                out.append((name, node.lineno, kind))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str]) -> int:
    known = modules()
    edges: dict[tuple[str, str], list[str]] = {}
    for mod, path in known.items():
        for dst, line, kind in imports(mod, path, known):
            where = f"{path.relative_to(ROOT)}:{line}" + (f" ({kind})" if kind else "")
            edges.setdefault((mod, dst), []).append(where)
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)

    n_fn = sum(1 for ws in edges.values() for w in ws if w.endswith("(in function)"))
    print(f"{len(known)} modules, {len(edges)} module-to-module imports "
          f"({n_fn} import statements inside functions)")
    if "--edges" in argv:
        for (src, dst), ws in sorted(edges.items()):
            print(f"  {src} -> {dst}: {', '.join(ws)}")

    comps = cycles(graph)
    print(f"\ncycles: {len(comps)}")
    for comp in comps:
        print("  " + " <-> ".join(comp))
        for src in comp:
            for dst in sorted(graph[src] & set(comp)):
                print(f"      {src} -> {dst}: {', '.join(edges[(src, dst)])}")

    up = [(s, d, ws) for (s, d), ws in sorted(edges.items())
          if layer(d) in (PIPELINE_LAYER, COMMAND_LAYER) and layer(s) < layer(d)]
    print(f"\nimports from a lower layer up to the pipeline or the commands: {len(up)}")
    for s, d, ws in up:
        print(f"  {s} [{NAMES[layer(s)]}] -> {d} [{NAMES[layer(d)]}]: {', '.join(ws)}")
    if "--all" in argv:
        other = [(s, d, ws) for (s, d), ws in sorted(edges.items())
                 if layer(s) < layer(d) and (s, d, ws) not in up]
        print(f"\nother upward imports (information): {len(other)}")
        for s, d, ws in other:
            print(f"  {s} [{NAMES[layer(s)]}] -> {d} [{NAMES[layer(d)]}]: {', '.join(ws)}")
    return 1 if comps or up else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
