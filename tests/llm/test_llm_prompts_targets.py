from __future__ import annotations

import copy

from talent_core.llm.context import candidate_view, generator_view, truncated_candidate_view
from talent_core.llm.prompts import (
    GENERATOR_SYSTEM,
    RETRIEVER_SYSTEM,
    generator_prompt,
    is_llama2_style,
    render_chat,
    retriever_prompt,
)
from talent_core.llm.targets import generator_target, retriever_target
from talent_core.llm.textualise import textualise
from talent_core.models import OutOfCandidate, Selection


def test_retriever_prompt_uses_chat_template(tiny_tok, candidate) -> None:
    r = retriever_prompt(tiny_tok, "who directed [Titanic]", textualise(candidate))
    assert r.answer_prefix == ""
    assert r.prompt.startswith("<|im_start|>system\nYou are an entity retriever for KGQA.")
    assert r.prompt.endswith("<|im_start|>assistant\n")
    assert "Question:\nwho directed [Titanic]\n\nSubgraph (CSV between <DESC> tags):\n<DESC>\n" \
        "node_id,node_attr\n0,titanic\n1,james cameron\n" in r.prompt
    assert "Now output EXACTLY ONE SINGLE LOWERCASE LINE with '|' separators. Nothing else." \
        in r.prompt
    assert RETRIEVER_SYSTEM in r.prompt
    assert "name1|name2|name3" in RETRIEVER_SYSTEM
    assert "DO NOT output placeholders like A/B/C/unknown." in RETRIEVER_SYSTEM


def test_llama2_form_without_template(tiny_tok) -> None:
    tok = copy.deepcopy(tiny_tok)
    tok.chat_template = None
    assert is_llama2_style(tok)
    r = render_chat(tok, "SYS", "USER")
    assert r.prompt == f"{tok.bos_token}[INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST]"
    assert r.answer_prefix == " "


def test_llama2_form_by_model_name(tiny_tok) -> None:
    assert is_llama2_style(tiny_tok, "meta-llama/Llama-2-7b-chat-hf")
    assert not is_llama2_style(tiny_tok, "meta-llama/Meta-Llama-3-8B-Instruct")
    r = generator_prompt(tiny_tok, "q?", "<DESC>\n</DESC>", model_name="llama-2-7b-chat")
    assert r.prompt.endswith("Nothing else. [/INST]") and "<<SYS>>\n" + GENERATOR_SYSTEM in r.prompt


def test_retriever_target_p_then_w(candidate) -> None:
    t = retriever_target(candidate, ["Leonardo DiCaprio", "james cameron", "not in s"])
    # P in the order of S, then W in the order of S; lowercase
    assert t.text == "james cameron|leonardo dicaprio|titanic|1997|avatar|english"
    assert t.positives == ["james cameron", "leonardo dicaprio"]
    assert t.weak == ["titanic", "1997", "avatar", "english"]
    for s in t.spans:
        assert t.text[s.start:s.end] == s.name


def test_retriever_target_dedups_and_cleans(candidate) -> None:
    from talent_core.models import CandidateNode

    candidate.nodes.append(CandidateNode(id="dup", name="TITANIC "))
    candidate.nodes.append(CandidateNode(id="pipe", name="a|b\nc"))
    t = retriever_target(candidate, [])
    assert t.text.split("|").count("titanic") == 1
    assert "a b c" in t.weak and "\n" not in t.text
    assert t.positives == []


def test_generator_target() -> None:
    t = generator_target(["James Cameron", "james cameron", "Avatar "])
    assert t.text == "james cameron|avatar"
    assert all(s.cls == "P" for s in t.spans)


def test_candidate_view_is_textualise(candidate) -> None:
    assert candidate_view(candidate).csv() == textualise(candidate)


def test_truncated_view_keeps_priority_and_ids(candidate) -> None:
    view, restricted = truncated_candidate_view(candidate, 3)
    # seeds first, then prize: titanic (seed), cameron, dicaprio
    assert view.nodes == [("0", "titanic"), ("1", "james cameron"), ("2", "leonardo dicaprio")]
    assert view.edges == [("0", "directed_by", "1"), ("0", "starred_actors", "2")]
    assert view.dropped_nodes == 3 and view.dropped_edges == 3
    assert [n.id for n in restricted.nodes] == ["m:titanic", "p:cameron", "p:dicaprio"]


def test_generator_view_eq14(candidate) -> None:
    sel = Selection(
        selected=[candidate.nodes[4]],  # avatar
        out_of_candidate=[OutOfCandidate(name="Kate Winslet", grounded=True, id="kg:k"),
                          OutOfCandidate(name="Mars", grounded=False)],
    )
    view = generator_view(candidate, sel)
    assert view.nodes == [("4", "avatar"), ("na1", "kate winslet"), ("na2", "mars")]
    # every edge of S with at least one endpoint selected, endpoints not listed
    assert view.edges == [("4", "directed_by", "1"), ("4", "in_language", "5")]
    csv = view.csv()
    assert csv.startswith("<DESC>\nnode_id,node_attr\n4,avatar\nna1,kate winslet\nna2,mars\n\n")
    assert csv.endswith("src,edge_attr,dst\n4,directed_by,1\n4,in_language,5\n</DESC>")
    with_ends = generator_view(candidate, sel, include_endpoints=True)
    assert [r[0] for r in with_ends.nodes] == ["1", "4", "5", "na1", "na2"]
    assert generator_view(candidate, None).csv() == textualise(candidate)


def test_generator_view_edge_cap(candidate) -> None:
    sel = Selection(selected=[candidate.nodes[0]])  # titanic: 3 edges
    view = generator_view(candidate, sel, max_edges=2)
    assert view.edges == [("0", "directed_by", "1"), ("0", "starred_actors", "2")]
    assert view.dropped_edges == 1


def test_named_style_writes_names_not_ids(tiny_tok, candidate) -> None:
    sel = Selection(selected=[candidate.nodes[4]],  # avatar
                    out_of_candidate=[OutOfCandidate(name="Mars", grounded=False)])
    view = generator_view(candidate, sel)
    # endpoints that are not listed as nodes are still named in the edge rows
    assert view.text("named") == (
        "<DESC>\nnode_attr\navatar\nmars\n\nsrc,edge_attr,dst\n"
        "avatar,directed_by,james cameron\navatar,in_language,english\n</DESC>"
    )
    assert view.text("paper") == view.text("compact") == view.csv()
    r = generator_prompt(tiny_tok, "who directed [Avatar]", view.text("named"), style="named")
    assert "avatar,directed_by,james cameron" in r.prompt
    assert "Answer the question from the subgraph." in r.prompt  # the compact instructions
    full = candidate_view(candidate).text("named")
    assert "titanic,directed_by,james cameron" in full and "node_id" not in full


def test_paths_style_writes_anchor_paths(tiny_tok, candidate) -> None:
    from talent_core.llm.context import anchor_paths, local_ids, path_anchors
    from talent_core.models import CandidateEdge, Seed

    # no recorded seeds: the nodes flagged seed (titanic) are the anchors
    assert path_anchors(candidate) == ["m:titanic"]
    sel = Selection(selected=[candidate.nodes[4], candidate.nodes[1]],  # avatar, cameron
                    out_of_candidate=[OutOfCandidate(name="Mars", grounded=False)])
    view = generator_view(candidate, sel)
    # nodes in S order; each written as its shortest path from titanic, the name last
    assert view.text("paths") == (
        "<DESC>\n"
        "titanic -directed_by-> james cameron\n"
        "titanic -directed_by-> james cameron <-directed_by- avatar\n"
        "mars\n"
        "</DESC>"
    )
    r = generator_prompt(tiny_tok, "who directed [Titanic]", view.text("paths"), style="paths")
    assert "Answer the question from the subgraph." in r.prompt
    # a name anchor beats a vector seed; two shortest paths are both kept; the anchor's own
    # line is its name; a node no path reaches is its name alone
    c = candidate.model_copy(update={
        "seeds": [Seed(id="m:avatar", name="Avatar", sources=["vector"]),
                  Seed(id="y:1997", name="1997", sources=["name"])],
        "edges": [*candidate.edges,
                  CandidateEdge(src="m:avatar", rel="release_year", dst="y:1997")],
    })
    assert path_anchors(c) == ["y:1997"]
    ids, names = local_ids(c)
    paths = anchor_paths(c, names, ids)
    assert paths[ids["y:1997"]] == ["1997"]
    assert paths[ids["p:cameron"]] == [
        "1997 <-release_year- titanic -directed_by-> james cameron",
        "1997 <-release_year- avatar -directed_by-> james cameron",
    ]
    assert paths[ids["l:en"]] == ["1997 <-release_year- avatar -in_language-> english"]
    alone = c.model_copy(update={"edges": c.edges[:3]})
    ids2, names2 = local_ids(alone)
    assert ids2["l:en"] not in anchor_paths(alone, names2, ids2)
    full = candidate_view(alone).text("paths")
    assert full.splitlines()[-1] == "</DESC>" and "\nenglish\n" in full


def test_rendered_head_is_the_fixed_start(tiny_tok) -> None:
    """`Rendered.head`: the prompt's start up to the question, the same for every question
    and graph, for both roles and styles."""
    from talent_core.llm.prompts import generator_prompt, retriever_prompt

    for render in (retriever_prompt, generator_prompt):
        for style in ("paper", "compact", "named"):
            a = render(tiny_tok, "who directed titanic", "<DESC>\n0,x\n</DESC>", style=style)
            b = render(tiny_tok, "what year was avatar", "<DESC>\n1,y\n</DESC>", style=style)
            assert a.head and a.head == b.head
            assert a.prompt.startswith(a.head) and "titanic" not in a.head
            assert a.prompt[len(a.head):].startswith("who directed titanic")
