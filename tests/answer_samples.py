"""A made-up answer for the tests of evidence paths, export and the graph's roles (not a
test): Tom (the seed) starred in two films both directed by Dee, a CVT node, a grounded
and a missing out-of-candidate name."""

from __future__ import annotations

from talent_core.models import (
    Answer,
    Candidate,
    CandidateEdge,
    CandidateNode,
    OutOfCandidate,
    RankedName,
    Selection,
)


def sample_answer() -> Answer:
    nodes = [CandidateNode(id="tom", name="Tom", seed=True),
             CandidateNode(id="f1", name="Film One"), CandidateNode(id="f2", name="Film Two"),
             CandidateNode(id="d", name="Dee <b>"), CandidateNode(id="m.0x", name="m.0x")]
    edges = [CandidateEdge(src="f1", rel="starred_actors", dst="tom"),
             CandidateEdge(src="f2", rel="starred_actors", dst="tom"),
             CandidateEdge(src="f1", rel="directed_by", dst="d"),
             CandidateEdge(src="f2", rel="directed_by", dst="d"),
             CandidateEdge(src="m.0x", rel="film.performance.actor", dst="tom")]
    cand = Candidate(question="who directed Tom's films", nodes=nodes, edges=edges)
    sel = Selection(selected=[nodes[1]], out_of_candidate=[
        OutOfCandidate(name="Elsewhere", grounded=True, id="e9", kg_name="Elsewhere"),
        OutOfCandidate(name="Nowhere", grounded=False)])
    return Answer(question=cand.question, answer=["Dee <b>"], candidate=cand, selection=sel,
                  ranked=[RankedName(name="Dee <b>", score=-1.0, id="d")], decode="ranked")
