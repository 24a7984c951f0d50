"""A count over a 10,000-member set in the embedded FalkorDB store: the operator's
`count_follow` (one Cypher count, no node returned) against fetching the members
(`follow`, what a count by listing would read), and one `member_values` read of them.

    python bench/operator_count_scale.py -o bench/results/operator_count_scale.json

A fresh store in a temporary data dir: one hub with N members over one relation, each
member with a year (a filter's or superlative's read); timings are the median of 5 runs
after one warm-up, with the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchio import load_average, write_json_atomic  # noqa: E402


def timed(fn, runs: int = 5) -> tuple[float, object]:
    fn()
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2), out


def main() -> None:
    from talent_core.config import Settings
    from talent_core.models import Edge
    from talent_core.store.falkordb import FalkorDBStore

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    members = [f"member {i:05d}" for i in range(args.n)]
    years = [str(1900 + i % 120) for i in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        store = FalkorDBStore.from_settings(Settings(data_dir=Path(tmp), _env_file=None))
        try:
            store.ensure_schema(384)  # the id index a load creates
            ids = ["hub", *members, *sorted(set(years))]
            store.upsert_entities([(i, i, None) for i in ids])
            store.upsert_triples([Edge(src=m, rel="member_of", dst="hub") for m in members]
                                 + [Edge(src=m, rel="year", dst=y)
                                    for m, y in zip(members, years)])
            count_ms, n = timed(lambda: store.count_follow(["hub"], "member_of", ["hub"]))
            follow_ms, got = timed(lambda: store.follow(["hub"], "member_of", args.n + 1))
            values_ms, rows = timed(lambda: store.member_values(members, "year"))
        finally:
            store.close()
    assert n == args.n and len(got) == args.n and len(rows) == args.n
    result = {"members": args.n, "count_follow_ms": count_ms, "follow_all_ms": follow_ms,
              "member_values_ms": values_ms, "load": load_average()}
    print(result)
    if args.out:
        write_json_atomic(args.out, result)


if __name__ == "__main__":
    main()
