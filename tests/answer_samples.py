"""Made-up answers for the tests of evidence paths, export and the graph (not a test):
`sample_answer` (Tom, the seed, starred in two films both directed by Dee, a CVT node, a
grounded and a missing out-of-candidate name) and `payload_answer` (a payload wherever KG
text reaches the graph)."""

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


def payload_answer(node: str, answer: CandidateNode, rel: str, entity: str,
                   ooc: OutOfCandidate, missing: str) -> Answer:
    """The seed Tom Hanks, ``node`` (its id and name) and ``answer`` on the evidence path
    (``rel`` its second relation), ``entity`` a node's name and its relation to the seed,
    ``node`` selected by the retriever, ``ooc`` a grounded out-of-candidate name and
    ``missing`` one the KG lacks."""
    nodes = [CandidateNode(id="Tom Hanks", name="Tom Hanks", seed=True),
             CandidateNode(id=node, name=node), answer,
             CandidateNode(id="q-entity", name=entity)]
    edges = [CandidateEdge(src="Tom Hanks", rel="starred_in", dst=node),
             CandidateEdge(src=node, rel=rel, dst=answer.id),
             CandidateEdge(src="q-entity", rel=entity, dst="Tom Hanks")]
    sel = Selection(selected=[nodes[1]], out_of_candidate=[
        ooc, OutOfCandidate(name=missing, grounded=False)])
    return Answer(question="q", answer=[answer.name],
                  candidate=Candidate(question="q", nodes=nodes, edges=edges), selection=sel,
                  ranked=[RankedName(name=answer.name, score=-1.0, id=answer.id)],
                  decode="ranked")
