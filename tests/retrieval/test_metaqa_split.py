"""bench/metaqa_split.py: the split stays disjoint, and --cover-types tops up rare question
types from the lines no part took, without changing the other files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _metaqa(root: Path) -> None:
    """Three hops of 40 questions: 36 of type `common`, 4 of `rare` per hop."""
    for h in (1, 2, 3):
        d = root / f"{h}-hop"
        d.mkdir(parents=True)
        qs = [f"q{h}-{i} about [E{i}]\tA{i}" for i in range(40)]
        types = ["rare" if i % 10 == 0 else "common" for i in range(40)]
        (d / "qa_dev.txt").write_text("\n".join(qs) + "\n", encoding="utf-8")
        (d / "qa_dev_qtype.txt").write_text("\n".join(types) + "\n", encoding="utf-8")


def _split(metaqa: Path, out: Path, *extra: str) -> dict[str, list[str]]:
    subprocess.run(
        [sys.executable, str(REPO / "bench" / "metaqa_split.py"), "--metaqa", str(metaqa),
         "--out", str(out), "--train", "5", "--val", "2", "--test", "3", *extra],
        check=True, capture_output=True,
    )  # fmt: skip
    return {p.stem: p.read_text(encoding="utf-8").splitlines() for p in out.glob("*.txt")}


def test_cover_types_tops_up_rare_types_only(tmp_path):
    _metaqa(tmp_path / "m")
    plain = _split(tmp_path / "m", tmp_path / "a")
    covered = _split(tmp_path / "m", tmp_path / "b", "--cover-types", "3")
    assert "train_types" not in plain
    for name in ("train", "val", "test"):
        assert covered[name] == plain[name]  # the other files are unchanged
    qtype = {}
    for h in (1, 2, 3):
        d = tmp_path / "m" / f"{h}-hop"
        lines = (d / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
        types = (d / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
        qtype.update(zip(lines, types, strict=True))
    taken = set(covered["train"]) | set(covered["val"]) | set(covered["test"])
    assert not taken & set(covered["train_types"])  # only lines no part took
    for h in (1, 2, 3):
        train_h = [ln for ln in covered["train"] if ln.startswith(f"q{h}-")]
        extra_h = [ln for ln in covered["train_types"] if ln.startswith(f"q{h}-")]
        rest_h = [ln for ln in qtype if ln.startswith(f"q{h}-") and ln not in taken]
        for t in ("common", "rare"):
            have = sum(qtype[ln] == t for ln in train_h)
            added = sum(qtype[ln] == t for ln in extra_h)
            available = sum(qtype[ln] == t for ln in rest_h)
            assert added == min(max(0, 3 - have), available), (h, t, have, added)
    # the fixture exercises the top-up (a rare type short in some hop's training draw)
    assert any(qtype[ln] == "rare" for ln in covered["train_types"])
