"""Graph serialisation exactly as TaLenT Appendix E (and G-Retriever's `desc`).

    <DESC>
    node_id,node_attr
    0,john f. kennedy
    1,inaugural address of john f. kennedy

    src,edge_attr,dst
    0,base.inaugurations.inauguration.inaugural_address,1
    </DESC>

That is G-Retriever's `nodes.to_csv(index=False) + "\\n" + edges.to_csv(index=False)`
wrapped in `<DESC>` lines: a node table, one empty line, an edge table, every row ending
in a newline.

CSV quoting (pandas/`csv` QUOTE_MINIMAL, which is what pandas' `to_csv` does): a field that
contains a comma, a double quote, a carriage return or a newline is wrapped in double
quotes and its double quotes are doubled: the name  say "hi", bye  is written as
"say ""hi"", bye".
Newlines inside a quoted name are kept (standard CSV), so a CSV reader recovers every name.

`textualise(candidate)` numbers the nodes of S 0..n-1 in the order of `candidate.nodes`
(stable for a given S), lowercases names for the retriever prompt (`lowercase=True`), and
deduplicates by name: KG nodes whose (lowercased) names are equal become one row, the first
one's id; edges are rewritten onto that id and repeated (src, rel, dst) rows are dropped.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from talent_core.models import Candidate

NodeRow = tuple[str | int, str]
EdgeRow = tuple[str | int, str, str | int]


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def graph_csv(nodes: Sequence[NodeRow], edges: Sequence[EdgeRow]) -> str:
    """The generic writer: `<DESC>`, node table, empty line, edge table, `</DESC>`.

    Rows are written as given (no lowercasing, no deduplication); ids may be ints or strings
    (the generator context uses `na1`, `na2`, ... for nodes outside S)."""
    return (
        "<DESC>\n"
        + _csv(("node_id", "node_attr"), nodes)
        + "\n"
        + _csv(("src", "edge_attr", "dst"), edges)
        + "</DESC>"
    )


def graph_csv_named(nodes: Sequence[str], edges: Sequence[tuple[str, str, str]]) -> str:
    """The ``named`` prompt style's variant (a deviation from Appendix E): a one-column node
    table of names, and edge rows that name their endpoints instead of citing ids::

        <DESC>
        node_attr
        repo men
        2010

        src,edge_attr,dst
        repo men,film.release_year,2010
        </DESC>
    """
    return (
        "<DESC>\n"
        + _csv(("node_attr",), [(n,) for n in nodes])
        + "\n"
        + _csv(("src", "edge_attr", "dst"), edges)
        + "</DESC>"
    )


def local_ids(candidate: Candidate, lowercase: bool = True) -> tuple[list[NodeRow], dict[str, int]]:
    """Node rows and the map KG id -> local int after name deduplication."""
    rows: list[NodeRow] = []
    by_name: dict[str, int] = {}
    id_map: dict[str, int] = {}
    for node in candidate.nodes:
        if node.id in id_map:
            continue
        name = node.name.lower() if lowercase else node.name
        local = by_name.get(name)
        if local is None:
            local = len(rows)
            by_name[name] = local
            rows.append((local, name))
        id_map[node.id] = local
    return rows, id_map


def textualise(candidate: Candidate, lowercase: bool = True) -> str:
    """S as the retriever prompt's `<DESC>` block (Appendix E)."""
    rows, id_map = local_ids(candidate, lowercase)
    edges: list[EdgeRow] = []
    seen: set[tuple[int, str, int]] = set()
    for e in candidate.edges:
        if e.src not in id_map or e.dst not in id_map:
            raise ValueError(f"edge {e.src!r} -[{e.rel}]-> {e.dst!r} has an endpoint outside S")
        key = (id_map[e.src], e.rel, id_map[e.dst])
        if key not in seen:
            seen.add(key)
            edges.append(key)
    return graph_csv(rows, edges)
