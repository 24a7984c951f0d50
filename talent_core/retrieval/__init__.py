"""Candidate subgraph retrieval: `candidate.retrieve` runs question -> seeds -> a registered
retriever (`registry`, one plug-in module each under `retrievers/`) -> Candidate;
`config.RetrievalConfig` holds every knob."""

from talent_core.retrieval.candidate import question_encoding, retrieve
from talent_core.retrieval.config import RetrievalConfig
from talent_core.retrieval.relations import QuestionEncoding
from talent_core.retrieval.retrievers.pcst import PrizeRule

__all__ = [
    "PrizeRule",
    "QuestionEncoding",
    "RetrievalConfig",
    "question_encoding",
    "retrieve",
]
