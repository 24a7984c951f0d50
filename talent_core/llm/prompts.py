"""Retriever and generator prompts (paper Appendix E.1 / E.2), rendered for a tokenizer.

Pure: text in, text out. The system and user texts are the paper's, with the spaces the
extracted PDF text lost put back. Two tasks share the same shape:

* ``"kgqa"`` (MetaQA, WebQSP, CWQ): the exact E.1 / E.2 texts.
* ``"label"`` (ExplaGraphs): the paper gives no prompt for it; the E.1 / E.2 texts adapted
  to "do the two arguments support or counter each other" (our wording, same rules).

Rendering (`render_chat`): the tokenizer's own chat template when it has one; the Llama-2
chat form ``<s>[INST] <<SYS>>\\n{system}\\n<</SYS>>\\n\\n{user} [/INST]`` when the tokenizer
has no template or the model name says Llama-2 chat (this is what the paper's examples
show). The returned `Rendered.prompt` is the complete prompt (BOS included where the format
has one) and must be tokenised with ``add_special_tokens=False``; a completion is appended
after `Rendered.answer_prefix` (``" "`` after ``[/INST]``, empty for chat templates).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from jinja2 import TemplateError

log = logging.getLogger(__name__)

Task = Literal["kgqa", "label"]
# "paper": the Appendix E.1 / E.2 texts. "compact": one-sentence instructions with the same
# output format: a deviation that makes a CPU training example cheaper. An adapter records
# the style it was trained with and is always prompted with it (`AdapterMeta.prompt_style`).
# "named": the compact instructions, and the graph written with names instead of local ids
# (`GraphView.text`): edge rows read ``repo men,release_year,2010``, so a small model need not
# look an id up in the node table (another deviation; the paper's CSV uses ids).
# "paths": the compact instructions, and each node written as the relation paths of S that
# reach it from the question's anchor entities, its name last (`context.anchor_paths`).
PromptStyle = Literal["paper", "compact", "named", "paths"]
PROMPT_STYLES: tuple[str, ...] = ("paper", "compact", "named", "paths")

_FORMAT = """RETURN FORMAT (MANDATORY):
Your ENTIRE reply must be EXACTLY ONE SINGLE LINE like:
name1|name2|name3
If you output anything other than the single pipe-separated line, the answer is invalid."""

def _retriever_system(intro: str, items: str) -> str:
    """An E.1 system text: ``intro`` (the role, what to select, the constraints), then the
    return format and the hard rules about ``items`` names (one text for both tasks)."""
    return f"""{intro}

{_FORMAT}

Hard rules:
- Output EXACTLY one line; no greetings, no explanations, no extra words.
- The line must contain ONLY lowercase {items} names separated by '|' (no labels like \
'Output:').
- Keep spaces inside names; DO NOT add spaces around '|'.
- DO NOT output placeholders like A/B/C/unknown."""


def _user(graph: str, ask: str) -> str:
    """A user template (``{question}`` and ``{graph}`` left to fill): the question, the graph
    (``graph`` names it) and the closing request ``ask``."""
    return f"""Question:
{{question}}

{graph} (CSV between <DESC> tags):
{{graph}}

Now output {ask} Nothing else."""


_ONE_LINE = "EXACTLY ONE SINGLE LOWERCASE LINE with '|' separators."

# --- E.1 retriever -------------------------------------------------------------------------

RETRIEVER_SYSTEM = _retriever_system("""You are an entity retriever for KGQA.
Your job is to SELECT CANDIDATE ENTITIES FROM THE SUBGRAPH that would help an answerer \
solve the question.
CRITICAL CONSTRAINTS:
- Return lowercase names only.
- Select the most relevant nodes from the subgraph for answering the question.""", "entity")

RETRIEVER_USER = _user("Subgraph", _ONE_LINE)

# --- E.2 generator -------------------------------------------------------------------------

GENERATOR_SYSTEM = f"""You are a KGQA answer generator.
PRIMARY GOAL: output the FINAL ANSWER entity name(s) to the question.
Use the provided subgraph as STRONG HINTS. If some correct answers are not in subgraph but \
answers the question, you may also include them.
Return all names in lowercase.

{_FORMAT}

Guidelines:
- Output ONLY answers; exclude distractors and the subject itself unless the subject IS the \
answer.
- If multiple entities correctly answer the question, include them all separated by '|'. \
Otherwise, output a single name.
- No greetings, no explanations, no labels (e.g., 'Answer:').
- Keep spaces inside names; DO NOT add spaces around '|'.
- DO NOT output placeholders (A/B/C/unknown)."""

GENERATOR_USER = _user("Subgraph", f"ONLY the final answer entity name(s) as {_ONE_LINE}")

# --- label task (ExplaGraphs): E.1 / E.2 adapted -------------------------------------------

LABEL_RETRIEVER_SYSTEM = _retriever_system("""You are a node retriever for argument stance \
prediction.
Your job is to SELECT NODES FROM THE EXPLANATION GRAPH that would help decide whether the \
two arguments support or counter each other.
CRITICAL CONSTRAINTS:
- Return lowercase names only.
- Select the most relevant nodes from the graph for deciding the stance.""", "node")

LABEL_RETRIEVER_USER = _user("Graph", _ONE_LINE)

LABEL_GENERATOR_SYSTEM = """You are a stance classifier for pairs of arguments.
PRIMARY GOAL: decide whether argument 1 and argument 2 support or counter each other.
Use the provided explanation graph as STRONG HINTS.

RETURN FORMAT (MANDATORY):
Your ENTIRE reply must be EXACTLY ONE WORD: support or counter.

Guidelines:
- No greetings, no explanations, no labels (e.g., 'Answer:').
- DO NOT output placeholders (A/B/C/unknown)."""

LABEL_GENERATOR_USER = _user("Graph", "EXACTLY ONE WORD, support or counter.")

# --- Appendix A.2: pseudo-gold node annotation for ExplaGraphs ----------------------------

ANNOTATOR_SYSTEM = f"""You are an annotator of explanation graphs.
Given two arguments, their GOLD stance label and an explanation graph, SELECT THE NODES OF \
THE GRAPH that form the critical reasoning path for deciding whether the arguments support \
or counter each other.
CRITICAL CONSTRAINTS:
- Return lowercase node names only, exactly as they appear in the graph.
- Select only nodes that appear in the graph.

{_FORMAT}

Hard rules:
- Output EXACTLY one line; no greetings, no explanations, no extra words.
- Keep spaces inside names; DO NOT add spaces around '|'.
- DO NOT output placeholders like A/B/C/unknown."""

ANNOTATOR_USER = """Argument 1: {arg1}
Argument 2: {arg2}
Gold stance: {label}

Graph (CSV between <DESC> tags):
{graph}

Now output EXACTLY ONE SINGLE LOWERCASE LINE with '|' separators naming the critical \
reasoning nodes. Nothing else."""


# --- compact style: the same tasks and output format, one-sentence instructions ----------

_COMPACT_USER = """Question:
{question}

{graph}"""

COMPACT = {
    ("retriever", "kgqa"): "Select the nodes of the subgraph that help answer the question. "
    "Reply with one line: lowercase node names separated by '|'.",
    ("generator", "kgqa"): "Answer the question from the subgraph. Reply with one line: "
    "the lowercase answer names separated by '|'.",
    ("retriever", "label"): "Select the nodes of the explanation graph that decide whether "
    "the two arguments support or counter each other. Reply with one line: lowercase node "
    "names separated by '|'.",
    ("generator", "label"): "Do the two arguments support or counter each other? Use the "
    "explanation graph. Reply with one word: support or counter.",
}


def explagraphs_question(arg1: str, arg2: str) -> str:
    """The question text of an ExplaGraphs example (both arguments, as in GraphQA)."""
    return (
        f"Argument 1: {arg1.strip()}\nArgument 2: {arg2.strip()}\n"
        "Do argument 1 and argument 2 support or counter each other?"
    )


# --- rendering ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    prompt: str  # complete prompt text; tokenise with add_special_tokens=False
    answer_prefix: str = ""  # text between the prompt and the completion
    # the prompt's start that no question or graph changes (the instructions, up to the
    # question): `LoadedLM.score` computes its KV cache once per adapter
    head: str = ""
    # the (system, user) turns it was rendered from: a server that ranks by the model's
    # choice sends them as chat messages (`server_choice`)
    chat: tuple[str, str] = ("", "")


def is_llama2_style(tokenizer: Any, model_name: str | None = None) -> bool:
    """Llama-2 ``[INST] <<SYS>>`` form: no chat template, or a Llama-2 chat model name."""
    name = (model_name or getattr(tokenizer, "name_or_path", "") or "").lower()
    if ("llama-2" in name or "llama2" in name) and "chat" in name:
        return True
    return not getattr(tokenizer, "chat_template", None)


def render_chat(
    tokenizer: Any, system: str, user: str, model_name: str | None = None
) -> Rendered:
    """One system + one user turn, with the assistant turn opened."""
    if is_llama2_style(tokenizer, model_name):
        bos = getattr(tokenizer, "bos_token", None) or ""
        return Rendered(f"{bos}[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]", " ",
                        chat=(system, user))
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except (TemplateError, ValueError) as e:  # e.g. "System role not supported": fold it in
        log.debug("chat template rejected a system turn (%s); merging it into the user turn", e)
        merged = [{"role": "user", "content": f"{system}\n\n{user}"}]
        text = tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)
    return Rendered(str(text), "", chat=(system, user))


# the paper's texts (E.1 / E.2 and their label-task adaptations): (role, task) -> (system,
# user template)
PAPER: dict[tuple[str, str], tuple[str, str]] = {
    ("retriever", "kgqa"): (RETRIEVER_SYSTEM, RETRIEVER_USER),
    ("retriever", "label"): (LABEL_RETRIEVER_SYSTEM, LABEL_RETRIEVER_USER),
    ("generator", "kgqa"): (GENERATOR_SYSTEM, GENERATOR_USER),
    ("generator", "label"): (LABEL_GENERATOR_SYSTEM, LABEL_GENERATOR_USER),
}


def _texts(role: str, task: Task, style: PromptStyle) -> tuple[str, str]:
    """(system, user template with {question} and {graph}) of ``role`` for a task and style."""
    if style != "paper":
        return COMPACT[(role, task)], _COMPACT_USER
    return PAPER[(role, task)]


def retriever_texts(task: Task = "kgqa", style: PromptStyle = "paper") -> tuple[str, str]:
    """The retriever's (system, user template with {question} and {graph})."""
    return _texts("retriever", task, style)


def generator_texts(task: Task = "kgqa", style: PromptStyle = "paper") -> tuple[str, str]:
    """The generator's (system, user template with {question} and {graph})."""
    return _texts("generator", task, style)


def _render(
    texts: tuple[str, str], tokenizer: Any, question: str, graph_csv: str, model_name: str | None
) -> Rendered:
    """(system, user template) with the question and the graph CSV filled in, rendered."""
    system, user = texts
    rendered = render_chat(
        tokenizer, system, user.format(question=question.strip(), graph=graph_csv), model_name
    )
    head = _prompt_head(tokenizer, system, user, model_name)
    return replace(rendered, head=head if rendered.prompt.startswith(head) else "")


_MARK = "\u27e6question\u27e7"  # stands in for the question to find where the head ends


@lru_cache(maxsize=64)
def _prompt_head(tokenizer: Any, system: str, user: str, model_name: str | None) -> str:
    """The rendered prompt's text before the question (`Rendered.head`), the same for
    every question and graph: rendered once per template, not per prompt (prompts are
    rendered several times over while they are fitted to a token budget)."""
    marked = render_chat(tokenizer, system, user.format(question=_MARK, graph=""),
                         model_name).prompt
    return marked[: marked.find(_MARK)] if _MARK in marked else ""


def retriever_prompt(
    tokenizer: Any, question: str, graph_csv: str, task: Task = "kgqa",
    model_name: str | None = None, style: PromptStyle = "paper",
) -> Rendered:
    """E.1: the question and S as CSV inside <DESC> (``graph_csv`` includes the tags)."""
    return _render(retriever_texts(task, style), tokenizer, question, graph_csv, model_name)


def generator_prompt(
    tokenizer: Any, question: str, graph_csv: str, task: Task = "kgqa",
    model_name: str | None = None, style: PromptStyle = "paper",
) -> Rendered:
    """E.2: the question and the selected evidence (V-hat, E-hat) as CSV inside <DESC>."""
    return _render(generator_texts(task, style), tokenizer, question, graph_csv, model_name)


def annotator_prompt(
    tokenizer: Any, arg1: str, arg2: str, label: str, graph_csv: str,
    model_name: str | None = None,
) -> Rendered:
    """Appendix A.2: graph, both arguments and the gold label -> critical reasoning nodes."""
    user = ANNOTATOR_USER.format(
        arg1=arg1.strip(), arg2=arg2.strip(), label=label.strip().lower(), graph=graph_csv
    )
    return render_chat(tokenizer, ANNOTATOR_SYSTEM, user, model_name)
