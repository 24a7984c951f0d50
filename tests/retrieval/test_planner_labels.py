"""The planner trained from relation-path label records (`--format webqsp-paths`): the
reader (good lines, a bad line named by file:line), the label sources, path accuracy, the
fit, the bundled planner's automatic choice by the store's relations, and the CVT rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from talent_core.errors import DataError
from talent_core.retrieval.planner import BUNDLED, PlannerModel, resolve_planner
from talent_core.training.planner import (
    PathLabelRecord,
    fit_from_labels,
    path_accuracy,
    path_labels,
    read_path_labels,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "webqsp-train" / "train.jsonl"

BORN = ["people.person.place_of_birth"]
SPOUSE = ["people.person.spouse_s", "people.marriage.spouse"]


def record(i: int, question: str, chain: list[str], ground: list[list[str]],
           split: str = "train") -> dict:
    return {"id": f"WebQTrn-{i}", "split": split, "question": question, "q_entity": ["Ann Lee"],
            "answer": ["x"], "inferential_chain": chain, "ground_paths": ground}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reader_reads_good_records_and_names_the_bad_line(tmp_path):
    good = [json.dumps(record(0, "where was ann lee born", BORN, [BORN, []])),
            "",
            json.dumps(record(1, "who did ann lee marry", SPOUSE, [SPOUSE], "validation"))]
    recs = read_path_labels(write_lines(tmp_path / "ok.jsonl", good))
    assert [r.id for r in recs] == ["WebQTrn-0", "WebQTrn-1"]
    assert recs[0].ground_paths == [BORN, []] and recs[1].split == "validation"

    bad_json = write_lines(tmp_path / "bad.jsonl", [good[0], "{not json"])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: invalid JSON"):
        read_path_labels(bad_json)
    bad_split = write_lines(tmp_path / "split.jsonl", [
        good[0], good[0], json.dumps(record(2, "q", BORN, [BORN], "test"))])
    with pytest.raises(DataError, match=r"split\.jsonl:3: split"):
        read_path_labels(bad_split)
    no_question = write_lines(tmp_path / "noq.jsonl", [json.dumps({"id": "a", "q_entity": []})])
    with pytest.raises(DataError, match=r"noq\.jsonl:1: question"):
        read_path_labels(no_question)
    empty_rel = write_lines(tmp_path / "rel.jsonl", [json.dumps(record(3, "q", BORN, [[" "]]))])
    with pytest.raises(DataError, match=r"rel\.jsonl:1: ground_paths"):
        read_path_labels(empty_rel)


def test_label_sources():
    noisy = [["people.person.gender", "people.person.gender"], ["people.marriage.spouse"] * 2]
    rec = PathLabelRecord.model_validate(record(0, "q", SPOUSE, [*noisy, []]))
    assert set(path_labels(rec, "ground")) == {tuple(p) for p in noisy}
    assert path_labels(rec, "chain") == {tuple(SPOUSE): 1.0}
    # both: the ground paths sharing a relation with the chain
    assert path_labels(rec, "both") == {("people.marriage.spouse",) * 2: 1.0}
    none_agree = PathLabelRecord.model_validate(record(1, "q", BORN, [SPOUSE]))
    assert path_labels(none_agree, "both") == {tuple(SPOUSE): 1.0}
    no_ground = PathLabelRecord.model_validate(record(2, "q", BORN, []))
    assert path_labels(no_ground, "both") == {tuple(BORN): 1.0}
    assert path_labels(no_ground, "ground") == {}


def test_path_accuracy_counts_the_top_path_against_the_ground_paths():
    paths = [tuple(BORN), tuple(SPOUSE)]
    model = PlannerModel(paths=paths, weight=np.eye(2, 4, dtype=np.float32) * 10,
                         bias=np.zeros(2, dtype=np.float32))
    recs = [PathLabelRecord.model_validate(r) for r in [
        record(0, "a", SPOUSE, [BORN]),        # top BORN: right (the chain: wrong)
        record(1, "b", SPOUSE, [SPOUSE]),      # top SPOUSE: right
        record(2, "c", SPOUSE, [BORN]),        # top SPOUSE, ground BORN: wrong
        record(3, "d", [], [])]]               # no ground paths: not counted
    x = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=np.float32)
    got = path_accuracy(model, x, recs)
    assert got["questions"] == 3 and got["path_acc"] == pytest.approx(2 / 3)
    assert got["path_acc5"] == 1.0  # both paths are in every top 5
    assert got["chain_questions"] == 3 and got["chain_acc"] == pytest.approx(2 / 3)


class KeywordEmbedder:
    """Test embedder: the question's keyword decides its direction (plus a little noise)."""

    WORDS = ("born", "marry", "die")

    def encode(self, texts, progress=False):
        rng = np.random.default_rng(0)
        out = rng.normal(0, 0.05, (len(texts), 8)).astype(np.float32)
        for i, t in enumerate(texts):
            for k, w in enumerate(self.WORDS):
                if w in t:
                    out[i, k] += 1.0
        return out


def test_fit_from_labels_learns_the_paths_and_validates_on_the_split(tmp_path):
    rows = []
    for i in range(30):
        rows.append(record(i, f"where was ann lee born {i}", BORN, [BORN]))
        rows.append(record(100 + i, f"who did ann lee marry {i}", SPOUSE, [SPOUSE]))
    rows.append(record(200, "where was ann lee born again", BORN, [BORN], "validation"))
    rows.append(record(201, "who did ann lee marry again", SPOUSE, [SPOUSE], "validation"))
    rows.append(record(202, "where did ann lee die", ["x.y"], [["x.y"]], "validation"))
    recs = [PathLabelRecord.model_validate(r) for r in rows]
    model = fit_from_labels(recs, KeywordEmbedder(), tmp_path / "p", name="toy",
                            embedding_model="kw", source="chain", epochs=100)
    assert set(model.paths) == {tuple(BORN), tuple(SPOUSE)}
    assert model.meta["training"]["path_acc"] == 1.0
    # the third validation question asks for a path no training question had
    assert model.meta["validation"]["questions"] == 3
    assert model.meta["validation"]["path_acc"] == pytest.approx(2 / 3)
    back = PlannerModel.load(tmp_path / "p")
    assert back.paths == model.paths and back.meta["labels"]["source"] == "chain"
    # min_count drops paths seen too rarely
    few = [*recs[:3], *recs[-3:]]  # 2 born, 1 marry in training
    small = fit_from_labels(few, KeywordEmbedder(), None, name="toy", embedding_model="kw",
                            source="chain", min_count=2, epochs=10)
    assert small.paths == [tuple(BORN)]


class RelStore:
    def __init__(self, rels: set[str]):
        self.rels = rels

    def existing_relations(self, names):
        return {n for n in names if n in self.rels}


def test_bundled_choice_follows_the_store_relations():
    if not (BUNDLED / "freebase" / "planner.json").is_file():
        pytest.fail("the Freebase planner is not shipped under adapters/planner/freebase")
    fb = PlannerModel.load(BUNDLED / "freebase")
    metaqa = PlannerModel.load(BUNDLED / "metaqa")
    got, known = resolve_planner("bundled", RelStore(fb.relations), "minilm")
    assert got is not None and got.meta["name"] == "freebase" and known
    got, _ = resolve_planner("bundled", RelStore(metaqa.relations), "minilm")
    assert got is not None and got.meta["name"] == "metaqa"
    other = resolve_planner("bundled", RelStore({"other.rel"}), "minilm")[0]
    assert other is not None and other.zero_shot  # a KG no trained planner fits


def test_cvt_ends_never_join_the_answers():
    from talent_core.answer import join_planned
    from talent_core.models import Edge
    from talent_core.store.memory import MemoryStore

    store = MemoryStore()
    store.upsert_entities([("Ann Lee", "Ann Lee", None), ("m.0abc", "m.0abc", None),
                           ("Bob", "Bob", None)])
    store.upsert_triples([Edge(src="Ann Lee", rel="people.person.spouse_s", dst="m.0abc"),
                          Edge(src="m.0abc", rel="people.marriage.spouse", dst="Bob")])
    model = PlannerModel(paths=[tuple(SPOUSE)], weight=np.zeros((1, 2), dtype=np.float32),
                         bias=np.zeros(1, dtype=np.float32))
    kg: dict[str, tuple[str, str]] = {}
    join_planned(store, model, kg, {"m.0abc": 0.9, "Bob": 0.5})
    assert kg == {"bob": ("Bob", "Bob")}


@pytest.mark.skipif(not DATA.is_file(), reason="../shared/data/webqsp-train absent")
def test_webqsp_training_labels_read():
    recs = read_path_labels(DATA)
    assert len(recs) == 3072
    assert sum(r.split == "validation" for r in recs) == 246
    assert sum(not r.q_entity for r in recs) <= 1
    assert sum(bool(r.ground_paths) for r in recs) == 2950
    assert sum(bool(r.inferential_chain) for r in recs) == 3021


def test_train_planner_webqsp_paths_cli_names_the_bad_line(tmp_path):
    from typer.testing import CliRunner

    from talent_core.commands import app

    bad = write_lines(tmp_path / "labels.jsonl", [
        json.dumps(record(0, "where was ann lee born", BORN, [BORN])), '{"id": 1, '])
    r = CliRunner().invoke(app, ["train", "planner", str(bad), "--format", "webqsp-paths",
                                 "-o", str(tmp_path / "p")])
    assert r.exit_code == 2 and "labels.jsonl:2: invalid JSON" in r.output
    assert not (tmp_path / "p").exists()
    r = CliRunner().invoke(app, ["train", "planner", str(bad), "--format", "webqsp-paths",
                                 "--labels", "gold", "-o", str(tmp_path / "p")])
    assert r.exit_code == 2 and "--labels" in r.output


def test_a_store_holding_both_kgs_plans_each_question_with_its_kgs_planner():
    from talent_core.answer import plan_paths
    from talent_core.models import Candidate, CandidateEdge, Edge, Seed
    from talent_core.retrieval.planner import choose_planner
    from talent_core.store.memory import MemoryStore

    fb = PlannerModel.load(BUNDLED / "freebase")
    metaqa = PlannerModel.load(BUNDLED / "metaqa")
    both = RelStore(fb.relations | metaqa.relations)
    got, known = resolve_planner("bundled", both, "minilm")
    assert got is not None and got.meta["name"] == "freebase"
    assert [m.meta["name"] for m, _ in got.alternatives] == ["metaqa"]
    assert choose_planner(got, known, {"directed_by", "starred_actors"})[0].meta["name"] == \
        "metaqa"
    assert choose_planner(got, known, {"people.person.place_of_birth"})[0] is got
    assert choose_planner(got, known, set())[0] is got  # no anchor edges: the store's best

    # through plan_paths: a MetaQA question on the mixed store walks MetaQA's relations
    store = MemoryStore()
    store.upsert_entities([("f", "Film", None), ("d", "Dir", None)])
    store.upsert_triples([Edge(src="f", rel="directed_by", dst="d")])

    class Enc:
        def encode(self, texts, progress=False):
            return np.ones((len(texts), 384), dtype=np.float32)

    cand = Candidate(question="who directed Film", anchors=["f"],
                     seeds=[Seed(id="f", name="Film", score=1.0)],
                     edges=[CandidateEdge(src="f", rel="directed_by", dst="d")])
    plan = plan_paths(got, known, Enc(), store, cand)  # type: ignore[arg-type]
    assert plan.model is not None and plan.model.meta["name"] == "metaqa"
    assert all(set(p.rels) <= metaqa.relations for p in plan.paths)
