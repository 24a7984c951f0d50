"""Typed records handed between pipeline stages and modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

QuestionFormat = Literal["metaqa", "rog"]  # question files: MetaQA text lines, RoG JSONL
QUESTION_FORMATS: tuple[QuestionFormat, ...] = get_args(QuestionFormat)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Entity(_Frozen):
    id: str
    name: str


class ScoredEntity(_Frozen):
    entity: Entity
    score: float  # cosine similarity in [-1, 1], higher is closer (both stores)


class ScoredRelation(_Frozen):
    name: str
    score: float


class Edge(_Frozen):
    src: str  # entity id
    rel: str
    dst: str  # entity id


class Subgraph(BaseModel):
    """Nodes and edges with their text; what the store returns for a neighbourhood."""

    nodes: list[Entity] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    truncated: bool = False  # a fan-out or total cap cut the expansion

    def node_ids(self) -> set[str]:
        return {n.id for n in self.nodes}


class StoreStats(BaseModel):
    entities: int
    relations: int
    triples: int
    entities_with_embedding: int = 0
    store: str = ""



# --- sources (issue 33): which load asserted which triple --------------------------------

LEGACY_SOURCE_ID = 0  # the triples of a store loaded before sources were recorded
LEGACY_SOURCE_NAME = "legacy"


class SourceRecord(BaseModel):
    """One load's source as the store keeps it: a file (or --source NAME) and its load."""

    id: int  # >= 1; 0 is `legacy` (triples written before sources were recorded)
    name: str
    sha256: str | None = None  # of the input file (None: a Hub dataset, or legacy)
    format: str = ""
    created: str = ""  # ISO-8601 UTC time of the load (or of the last --replace)
    # loading / complete: a load; replacing / unloading: a --replace / unload under way (a
    # killed one is finished by running the same command again)
    state: str = "complete"
    rows_read: int = 0
    loaded: int = 0  # unique triples of the input (per batch, as the load report counts)
    rejected: int = 0


class SourceInfo(SourceRecord):
    """A source with its live counts (`talent sources`)."""

    triples: int = 0  # triples it asserts now
    only: int = 0  # of those, triples no other source asserts (what an unload removes)


class SourcesReport(BaseModel):
    """`talent sources --json`: every source and the store's totals."""

    sources: list[SourceInfo] = Field(default_factory=list)
    totals: StoreStats


class NameCollision(BaseModel):
    """A (normalised) name that several entities share: a name lookup is ambiguous."""

    name: str
    count: int
    ids: list[str] = Field(default_factory=list)  # the first few


class SourceChange(BaseModel):
    """What an unload or a --replace did (idempotent: a rerun after a crash reports what
    was left to do)."""

    source: str
    source_id: int
    action: Literal["unload", "replace"]
    added: int = 0  # assertions of the source that are new (replace)
    removed: int = 0  # assertions of the source taken back
    unchanged: int = 0  # replace: triples of the new file the source asserted already
    triples_deleted: int = 0  # triples no source asserted any more
    entities_deleted: int = 0  # entities left without a triple (with their vectors)
    relations_deleted: int = 0  # catalogue relations no triple uses any more
    seconds: float = 0.0
    seconds_by_step: dict[str, float] = Field(default_factory=dict)  # load, read, retract, ...
    vector_indexes_rebuilt: bool = False  # FalkorDB: deleted HNSW entries dropped (see README)
    store_before: StoreStats | None = None
    store_after: StoreStats | None = None

# --- retrieval hand-offs (question -> seeds -> neighbourhood -> candidate S) -------------

SeedSource = str  # "vector" | "name" | "fulltext" | "topic" (bracketed / q_entity)


class Seed(BaseModel):
    id: str
    name: str
    score: float = 0.0
    sources: list[SeedSource] = Field(default_factory=list)


class CandidateNode(BaseModel):
    id: str  # KG entity id
    name: str
    prize: float = 0.0
    seed: bool = False


class CandidateEdge(BaseModel):
    src: str  # KG entity id
    rel: str
    dst: str  # KG entity id
    prize: float = 0.0


LinkHow = Literal["exact", "id", "fuzzy"]  # exact normalised name, topic id, fuzzy name


class LinkAlternative(_Frozen):
    """Another entity a mention could read as (within the margin of the chosen one)."""

    id: str
    name: str
    score: float


class Link(BaseModel):
    """A question's mention ([bracketed] topic, or a word span) and the KG entity it reads
    as (`retrieval.linking`); ``id`` None: not linked (not in the KG), with the closest
    names. ``score``: the folded-name similarity in [0, 1] (`text.name_similarity`)."""

    mention: str
    id: str | None = None
    name: str | None = None
    score: float = 0.0
    how: LinkHow | None = None
    topic: bool = False  # the mention was given as a topic ([brackets], q_entity)
    alternatives: list[LinkAlternative] = Field(default_factory=list)  # "did you mean"
    closest: list[str] = Field(default_factory=list)  # unlinked: the KG's closest names
    # the other KG ids of the chosen name (a name several entities share: all anchor)
    shared: list[str] = Field(default_factory=list)

    @property
    def linked(self) -> bool:
        return self.id is not None


class Turn(BaseModel):
    """What a follow-up question may refer to: the previous question, the entities it was
    about (its anchors) and its answers (`conversation.turn_of`)."""

    question: str
    topic: list[Entity] = Field(default_factory=list)
    answers: list[Entity] = Field(default_factory=list)


class Reading(BaseModel):
    """How a follow-up's referring words were read (`conversation.read_follow_up`): the
    previous turn's answers or its topic, the entities that then anchor the question."""

    words: str  # as typed: "them", "those films", "his"; "question": the whole question
    # "answers" / "topic": the previous turn's; "question": a new topic for the previous
    # question ("what about [Titanic]?", `conversation.rephrase`), asked as ``asked_as``
    source: Literal["answers", "topic", "question"]
    asked_as: str | None = None
    entities: list[Entity] = Field(default_factory=list)
    total: int = 0  # the previous turn's entities of that source, before `FOLLOW_UP_MAX`
    people: bool = False  # the answers of a who-question ("he" / "she" read them first)

    @property
    def plural(self) -> bool:
        """More than one referent: entities that share a name (case variants, as the tag
        "tom hanks" beside Tom Hanks) are one."""
        return self.total > len(self.entities) or len(
            {e.name.casefold() for e in self.entities}) > 1

    @property
    def text(self) -> str:
        """One line for the UI and CLI: "reading 'them' as the 32 answers above"."""
        if self.asked_as is not None:
            return f"reading '{self.words}' as '{self.asked_as}' (the question above)"
        n = len(self.entities)
        what = "answers" if self.source == "answers" else "topic entities"
        if not self.plural:
            whose = "answer" if self.source == "answers" else "topic"
            return f"reading '{self.words}' as {self.entities[0].name} (the {whose} above)"
        cut = f" (the first {n} of {self.total})" if self.total > n else ""
        return f"reading '{self.words}' as the {n} {what} above{cut}"


OperatorKind = Literal["count", "filter", "superlative", "compare", "exists"]
Comparator = Literal["gt", "ge", "lt", "le"]


class Operation(_Frozen):
    """What a question asks of its answer set beyond one relation path, as read from its
    words (`operators.recognise`)."""

    op: OperatorKind
    question: str  # as asked (brackets removed)
    base: str  # the question without the operator's words: what is retrieved and planned
    cue: str  # the words that asked for it: "how many", "after 2000", "latest"
    clause: str = ""  # the words naming the value's relation ("released"), for the matcher
    comparator: Comparator | None = None  # filter: member value <op> `value`
    value: str | None = None  # filter: the literal as written
    most: bool = True  # superlative / compare: the largest value (or count), else smallest
    by_count: bool = False  # compare: the two entities' counts of a path, not a value
    yes_no: bool = False  # the question wants yes or no
    noun: str = ""  # count: what is counted ("movies"), as written


class StoreQuery(BaseModel):
    """A read-only store query an operator ran: the statement and its parameters (lists
    cut to their first few items in `params`, their full length in `sizes`)."""

    name: str
    cypher: str
    params: dict[str, object] = Field(default_factory=dict)
    sizes: dict[str, int] = Field(default_factory=dict)


class OperationResult(BaseModel):
    """An operator's answer over the planned set: typed, with the set and values it read and
    the queries the store ran (`operators.apply`)."""

    op: OperatorKind
    answer_type: Literal["number", "yes/no", "entities"]
    answer: list[str] = Field(default_factory=list)  # ["27"], ["yes"] or entity names
    answer_ids: list[str] = Field(default_factory=list)
    text: str = ""  # one line: "27 movies", "yes: ...", "Cast Away (2000) ..."
    path: str | None = None  # the relation path of the set counted, filtered or compared
    relation: str | None = None  # the relation whose values were compared
    members: int = 0  # how many members (or entities) the operator read
    listed: list[str] = Field(default_factory=list)  # the plain list, at most `LISTED`
    values: dict[str, str] = Field(default_factory=dict)  # an answer's name -> its value
    queries: list[StoreQuery] = Field(default_factory=list)
    notice: str | None = None  # the operator or its relation is unsure: why


class Candidate(BaseModel):
    """The candidate connected subgraph S (paper §2.2) for one question."""

    question: str
    method: str = "pcst"  # the retriever that built it (RetrievalConfig.method)
    seeds: list[Seed] = Field(default_factory=list)
    anchors: list[str] = Field(default_factory=list)  # ids of the seeds expansion started from
    nodes: list[CandidateNode] = Field(default_factory=list)
    edges: list[CandidateEdge] = Field(default_factory=list)
    truncated: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    links: list[Link] = Field(default_factory=list)  # entity linking of the mentions
    # a follow-up: the previous turn's entities its referring words read as (they anchor S
    # and plan as one group)
    reading: Reading | None = None
    operation: Operation | None = None  # what the question asks beyond a path


# --- LLM hand-offs (candidate -> selection -> answer) -------------------------------------


Decode = Literal["free", "ranked"]  # how the LLMs produce names (greedy text or scored)
DECODES: tuple[Decode, ...] = get_args(Decode)


class OutOfCandidate(BaseModel):
    """A name the retriever produced that is not a node of S, checked against the KG."""

    name: str
    grounded: bool
    id: str | None = None
    kg_name: str | None = None  # the KG's own spelling when grounded


class RankedName(BaseModel):
    """A name scored by ranked decoding: its log-likelihood as the model's first item."""

    name: str  # the KG's name for answers; the prompt's lowercase name for V-hat
    score: float
    id: str | None = None  # KG id (answers)
    # answers under a relation-path plan: score = lm_score + w log(prior + eps)
    lm_score: float | None = None
    prior: float | None = None
    path: str | None = None  # the likeliest planned relation path reaching it (`path_text`)


def path_text(rels: Sequence[str]) -> str:
    """How a relation path is written everywhere (answers, rows, UI): "r1 > r2"."""
    return " > ".join(rels)


class PlannedPath(BaseModel):
    """A relation path the planner expects the answer at (`planning`)."""

    rels: list[str]  # relations followed from the anchors, direction ignored
    prob: float
    ends: int = 0  # nodes it reaches in the KG (within the walk's caps)
    anchor: str | None = None  # the mention it starts from, when several mentions' paths meet
    # (the top path) a KG relation the question reads as better than any path its anchors
    # have, which they lack: the answer follows the closest path instead (`plan_notice`)
    missing: str | None = None

    @property
    def text(self) -> str:
        return path_text(self.rels)


class Selection(BaseModel):
    """What the retriever R_theta selected from S (names as printed, lowercase)."""

    raw: str = ""
    names: list[str] = Field(default_factory=list)  # parsed output names, in order (V-hat)
    selected: list[CandidateNode] = Field(default_factory=list)  # nodes of S it named
    out_of_candidate: list[OutOfCandidate] = Field(default_factory=list)
    truncated: bool = False  # generation stopped at max_new_tokens (last item dropped)
    decode: Decode = "free"
    ranked: list[RankedName] = Field(default_factory=list)  # ranked: every node of S, best first


AnswerSetRule = Literal["path", "margin"]  # Settings.answer_set
GeneratorType = Literal["text", "graph-prompt"]  # CSV rows only / rows + GNN soft prompt
GENERATOR_TYPES: tuple[GeneratorType, ...] = get_args(GeneratorType)


UNSURE_BELOW = 0.5  # a plan whose top path is less likely than this is said to be unsure
CLOSE_RATIO = 0.5  # ... or whose runner-up is more than this fraction as likely as the top


LLMBackend = Literal["local", "openai"]  # Settings.llm_backend: where both LLM roles run
# how ranked decoding ranked the names: "logprobs" (each name's log-likelihood: local forward
# pass, or the server's log-probabilities), "choice" (the model chose among the numbered
# names with structured output: a server without log-probabilities), "free" (the model
# wrote its answer, grounded in the KG afterwards)
Ranking = Literal["logprobs", "choice", "free"]


class ModelUse(BaseModel):
    """Which language model answered in each role, where (Settings.llm_backend) and how
    ranked decoding scored names."""

    backend: LLMBackend = "local"
    retriever: str | None = None  # None: no retriever ran (retrieval-only / no-retriever)
    generator: str | None = None
    ranking: Ranking = "logprobs"


class Answer(BaseModel):
    question: str
    answer: list[str] = Field(default_factory=list)
    raw: str = ""
    candidate: Candidate
    selection: Selection | None = None  # None for the "--no-retriever" ablation
    edges: list[CandidateEdge] = Field(default_factory=list)  # context edges given to G_phi
    decode: Decode = "free"
    ranked: list[RankedName] = Field(default_factory=list)  # ranked: every candidate answer
    frozen: list[str] = Field(default_factory=list)  # which LLM roles ran without an adapter
    generator: GeneratorType = "text"  # which generator answered
    plan: list[PlannedPath] = Field(default_factory=list)  # ranked answers' relation paths
    planner: str | None = None  # which planner planned: "matcher (name)" / "zero-shot"
    # the plan's probability of its top path before truncation (the matcher's softmax over
    # every path its beam kept), and the second likeliest path: `plan_notice` reads them
    plan_confidence: float | None = None
    plan_runner_up: PlannedPath | None = None
    # the mentions whose planned paths meet: the answers are the nodes all of them reach
    plan_joint: list[str] = Field(default_factory=list)
    # ranked, under a plan: the planned path whose ends are the answer set (all of them, best
    # first); None: the generator's margin chose the answers
    answer_path: str | None = None
    answer_ids: list[str] = Field(default_factory=list)  # KG id of each answer (path rule)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    # the mentions no KG entity matched well enough: the answer abstains ("not in the KG")
    not_in_kg: list[str] = Field(default_factory=list)
    # a count, filter, superlative, comparison or yes/no over the planned set: its typed
    # answer is `answer`, the plain list stays in `operation.listed`
    operation: OperationResult | None = None
    models: ModelUse | None = None  # which language models answered (None: none ran)

    @property
    def plan_unsure(self) -> bool:
        """The plan is unsure (`plan_unsure`)."""
        return plan_unsure(self.plan, self.plan_confidence, self.plan_runner_up)

    @property
    def plan_notice(self) -> str | None:
        """One line for an unsure plan (`plan_notice`)."""
        return plan_notice(self.plan, self.plan_confidence, self.plan_runner_up,
                           self.answer_path)


def plan_unsure(plan: Sequence[PlannedPath], confidence: float | None,
                runner_up: PlannedPath | None) -> bool:
    """A plan is unsure: the KG lacks the relation the question reads as
    (`PlannedPath.missing`), its top path's probability is under `UNSURE_BELOW`, or the
    runner-up has more than `CLOSE_RATIO` of it."""
    if confidence is None or not plan:
        return False
    return bool(plan[0].missing) or confidence < UNSURE_BELOW or (runner_up is not None
                                         and runner_up.prob > CLOSE_RATIO * confidence)


def plan_notice(plan: Sequence[PlannedPath], confidence: float | None,
                runner_up: PlannedPath | None, answered: str | None = None) -> str | None:
    """One line for an unsure plan: the reading it answered and the runner-up's.
    ``answered``: the planned path the answer set followed (`Answer.answer_path`), where
    the generator's best answer lies on another than the likeliest (None: not known yet,
    as when the plan is sent before the answer)."""
    if not plan_unsure(plan, confidence, runner_up):
        return None
    if plan[0].missing:
        return (f"the question reads as '{plan[0].missing}', which the KG does not hold for "
                f"its topic: answered by the closest path it has, '{plan[0].text}'")
    other = next((p for p in plan[1:] if p.text == answered), None)
    if other is not None:  # p as the plan lists them
        return (f"unsure which relation path the question asks for: answered along "
                f"'{other.text}' (p {other.prob:.2f}), where the best-ranked answer lies; "
                f"the likeliest reading: '{plan[0].text}' (p {plan[0].prob:.2f}, "
                f"{plan[0].ends} end(s) in the KG)")
    line = (f"unsure which relation path the question asks for: answered as "
            f"'{plan[0].text}' (p {confidence:.2f})")
    if runner_up is not None:
        line += (f"; the next reading: '{runner_up.text}' (p {runner_up.prob:.2f}, "
                 f"{runner_up.ends} end(s) in the KG)")
    return line
