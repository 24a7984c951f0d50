"""Candidate subgraph retrieval (TaLenT §2.2 / G-Retriever): `candidate.retrieve` orchestrates
question -> seeds -> neighbourhood -> prizes -> PCST -> Candidate; `config.RetrievalConfig`
holds its knobs."""

from talent_core.retrieval.candidate import question_encoding, retrieve
from talent_core.retrieval.config import PrizeRule, RetrievalConfig
from talent_core.retrieval.relations import QuestionEncoding

__all__ = [
    "PrizeRule",
    "QuestionEncoding",
    "RetrievalConfig",
    "question_encoding",
    "retrieve",
]
