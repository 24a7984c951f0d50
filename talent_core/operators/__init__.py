"""Operators over the planned answer set: count, filter, superlative, comparison and
exists. `recognise` reads which one a question asks for (before retrieval: the set is
retrieved and planned from the question without the operator's words), `apply` computes
it in the store over the plan (after the answer stage)."""

from talent_core.operators.recognise import recognise
from talent_core.operators.run import PlainSet, apply

__all__ = ["PlainSet", "apply", "recognise"]
