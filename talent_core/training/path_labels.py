"""Relation-path label records: WebQSP training questions with RoG's ground relation paths
and the annotators' inferential chain, no triples (`webqsp-train/train.jsonl`); the labels
the question <-> path matcher trains on (`training.matcher`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from talent_core.errors import DataError
from talent_core.planning.paths import PathT

LabelSource = Literal["ground", "chain", "both"]
LABEL_SOURCES: tuple[str, ...] = ("ground", "chain", "both")


class PathLabelRecord(BaseModel):
    """One labelled question of `webqsp-train/train.jsonl`: the topic entity's name, the
    annotators' relation chain and RoG's ground relation paths (topic -> answers, direction
    ignored; an empty path: the answer is the topic itself); no triples."""

    model_config = ConfigDict(extra="ignore")
    id: str
    split: Literal["train", "validation"] = "train"
    question: str = Field(min_length=1)
    q_entity: list[str] = Field(default_factory=list)
    answer: list[str] = Field(default_factory=list)
    inferential_chain: list[str] = Field(default_factory=list)
    ground_paths: list[list[str]] = Field(default_factory=list)

    @field_validator("inferential_chain")
    @classmethod
    def _chain_names(cls, v: list[str]) -> list[str]:
        if any(not r.strip() for r in v):
            raise ValueError("an empty relation name")
        return v

    @field_validator("ground_paths")
    @classmethod
    def _path_names(cls, v: list[list[str]]) -> list[list[str]]:
        if any(not r.strip() for p in v for r in p):
            raise ValueError("an empty relation name")
        return v


def read_path_labels(path: Path | str) -> list[PathLabelRecord]:
    """The label records of a jsonl file (blank lines skipped); a bad line raises
    `DataError` naming file:line and the problem."""
    path = Path(path)
    out: list[PathLabelRecord] = []
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: invalid UTF-8 ({e.reason})") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object")
        try:
            out.append(PathLabelRecord.model_validate(obj))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "record"
            raise DataError(f"{path}:{lineno}: {where}: {err['msg']}") from None
    if not out:
        raise DataError(f"{path}: no label records")
    return out


def path_labels(rec: PathLabelRecord, source: LabelSource, max_len: int = 3
                ) -> dict[PathT, float]:
    """Soft target of a record (mass shared equally; paths longer than ``max_len`` dropped):
    "ground": its ground paths; "chain": its inferential chain; "both": the ground paths
    sharing a relation with the chain (the chain disambiguates RoG's noisy paths, which
    stay in the KG's naming), all of them when none does, the chain when there are none."""
    ground = list(dict.fromkeys(tuple(p) for p in rec.ground_paths if 0 < len(p) <= max_len))
    chain: list[PathT] = ([tuple(rec.inferential_chain)]
                          if 0 < len(rec.inferential_chain) <= max_len else [])
    if source == "ground":
        keep = ground
    elif source == "chain":
        keep = chain
    else:
        rels = set(rec.inferential_chain)
        keep = [p for p in ground if rels & set(p)] or ground or chain
    return {p: 1.0 / len(keep) for p in keep}
