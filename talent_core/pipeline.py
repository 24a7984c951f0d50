"""One Pipeline object for the CLI, the UI and evaluation: models and store opened once.

question -> seeds -> neighbourhood -> candidate S (retrieval/) -> selection (LLM retriever)
-> answer (LLM generator), with out-of-candidate names grounded against the KG.

Modes (the paper's ablations, §4 Table 4):
  "full"          R_theta selects from S, G_phi answers from (V-hat, E-hat)
  "no-retriever"  S is fed straight to G_phi (w/o retriever)
  "retrieval"     stop after S (no language model is loaded)
A retriever without an adapter directory is the frozen base model (the frozen-retriever
ablation).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from talent_core.config import Settings, get_settings
from talent_core.embedding import Embedder, get_embedder
from talent_core.llm.context import GraphView
from talent_core.models import (
    Answer,
    Candidate,
    CandidateEdge,
    Decode,
    Entity,
    GeneratorType,
    PlannedPath,
    RankedName,
    Selection,
    StoreStats,
    path_text,
)
from talent_core.questions import FORMAT_STOPWORDS, QuestionFormat, parse_question
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.retrieval.config import apply_overrides
from talent_core.store import GraphStore, open_store
from talent_core.text import check_question

if TYPE_CHECKING:
    from loaders import LoadReport
    from talent_core.llm.generator import GeneratorModel
    from talent_core.llm.lm import Stage
    from talent_core.llm.ranking import Scored
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.retrieval.planner import PlannerModel

log = logging.getLogger(__name__)

Mode = Literal["full", "no-retriever", "retrieval"]


class Pipeline:
    def __init__(
        self,
        settings: Settings | None = None,
        store: GraphStore | None = None,
        embedder: Embedder | None = None,
        retrieval: RetrievalConfig | None = None,
        retriever_dir: Path | None = None,
        generator_dir: Path | None = None,
        base_model: str | None = None,
        adapters: str | None = None,
        frozen_retriever: bool = False,
        decode: Decode | None = None,
        question_format: QuestionFormat | None = None,
        generator_type: GeneratorType | None = None,
        planner: str | None = None,
    ):
        """``adapters``: "bundled" (default, `settings.adapters`), "none" or a directory with
        retriever/ and generator/; ``retriever_dir`` / ``generator_dir`` override one role;
        ``frozen_retriever``: the retriever runs without adapter (the paper's ablation);
        ``question_format``: the dataset the questions come from (its domain stopwords;
        default `settings.question_format`); ``generator_type``: "text" or "graph-prompt"
        (which generator adapter "bundled" / a directory of adapters provides; default
        `settings.generator_type`; a ``generator_dir`` is what it is); ``planner``: the
        relation-path planner of ranked answers, "bundled", "none" or a directory (default
        `settings.planner`)."""
        self.settings = settings or get_settings()
        self.store = store or open_store(self.settings)
        self._embedder = embedder
        self.retrieval = retrieval or RetrievalConfig()
        self.question_format: QuestionFormat = question_format or self.settings.question_format
        self.base_model = base_model
        spec = adapters or self.settings.adapters
        self.generator_type: GeneratorType = generator_type or self.settings.generator_type
        default_r, default_g = resolve_adapters(spec, base_model or self.settings.base_model,
                                                self.generator_type if generator_dir is None
                                                else "text")
        chosen_r = None if frozen_retriever else (retriever_dir or default_r)
        chosen_g = generator_dir or default_g
        self.retriever_dir = Path(chosen_r) if chosen_r else None
        self.generator_dir = Path(chosen_g) if chosen_g else None
        self.decode: Decode = decode or self.settings.decode
        self.planner_spec = planner or self.settings.planner
        if self.planner_spec not in ("bundled", "none") and not Path(self.planner_spec).is_dir():
            raise FileNotFoundError(f"{self.planner_spec}: planner directory not found "
                                    "(TALENT_PLANNER: bundled, none or a directory)")
        self._planner: tuple[PlannerModel | None, set[str]] | None = None
        self._models: tuple[RetrieverModel, GeneratorModel] | None = None

    # --- lazily loaded resources (loaded once) -----------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            s = self.settings
            self._embedder = get_embedder(s.embedding_model, s.device, s.embed_batch_size,
                                          s.query_embedder)
        return self._embedder

    @property
    def planner(self) -> PlannerModel | None:
        """The relation-path planner ranked answers use (None: off, or no planner fits
        this store's relations), loaded once."""
        if self._planner is None:
            from talent_core.retrieval.planner import resolve_planner

            self._planner = resolve_planner(self.planner_spec, self.store,
                                            self.settings.embedding_model)
        return self._planner[0]

    def plan(self, candidate: Candidate
             ) -> tuple[list[PlannedPath], dict[str, float], dict[str, str]]:
        """The planned relation paths from ``candidate``'s anchors, the prior pi(node id)
        they give and the likeliest planned path reaching each node (`path_text`); all empty
        without a planner or anchors."""
        from talent_core.retrieval.planner import (
            node_paths,
            node_prior,
            plan_text,
            planned,
            walk,
        )

        model = self.planner
        if model is None or not candidate.anchors:
            return [], {}, {}
        names = {s.id: s.name for s in candidate.seeds}
        text = plan_text(candidate.question, [names.get(a, "") for a in candidate.anchors])
        steps = model.plan(self.embedder.encode([text])[0], known=self._planner[1])
        ends, _ = walk(self.store.follow, candidate.anchors, [t for t, _ in steps],
                       limit=model.walk_limit)
        via = {n: path_text(t) for n, t in node_paths(steps, ends).items()}
        return planned(steps, ends), node_prior(steps, ends), via

    @property
    def frozen_roles(self) -> list[str]:
        """The LLM roles that run on the base model without a trained adapter."""
        return [role for role, d in (("retriever", self.retriever_dir),
                                     ("generator", self.generator_dir)) if d is None]

    def frozen_in(self, mode: Mode) -> list[str]:
        """The frozen roles that ``mode`` actually runs (no retriever without one)."""
        if mode == "retrieval":
            return []
        return [r for r in self.frozen_roles if mode == "full" or r == "generator"]

    @property
    def models_loaded(self) -> bool:
        return self._models is not None

    @property
    def models(self) -> tuple[RetrieverModel, GeneratorModel]:
        """(RetrieverModel, GeneratorModel) on one base model, loaded on first use."""
        return self.load_models()

    def load_models(self, on_stage: Stage | None = None
                    ) -> tuple[RetrieverModel, GeneratorModel]:
        """`models`, with ``on_stage(what, done, total)`` called as loading proceeds."""
        if self._models is None:
            from talent_core.llm.lm import load_models

            s = self.settings
            self._models = load_models(
                on_stage=on_stage,
                base_model=self.base_model, retriever_dir=self.retriever_dir,
                generator_dir=self.generator_dir, settings=s,
                retriever_max_new_tokens=s.retriever_max_new_tokens,
                generator_max_new_tokens=s.generator_max_new_tokens,
                embed=lambda texts: self.embedder.encode(texts), store=self.store,
            )
        return self._models

    # --- stages ----------------------------------------------------------------------------
    def stats(self) -> StoreStats:
        return self.store.stats()

    def retrieval_config(self, **overrides) -> RetrievalConfig:
        """The pipeline's RetrievalConfig with ``overrides`` validated (an unknown key or a
        value out of range raises RetrievalSettingsError naming it) and the question
        format's stopwords added."""
        config = apply_overrides(self.retrieval, **overrides)
        words = FORMAT_STOPWORDS[self.question_format]
        if set(words) - set(config.stopwords):
            config = config.model_copy(update={"stopwords": [*config.stopwords, *words]})
        return config

    def retrieve(
        self, question: str, topic_entities: list[str] | None = None, **overrides
    ) -> Candidate:
        """Candidate S for ``question``, read by `parse_question` ([brackets] mark topic
        entities) whether typed or from a file; ``overrides``: RetrievalConfig fields."""
        config = self.retrieval_config(**overrides)
        question = check_question(question, self.settings.max_question_chars)
        text, topics = parse_question(question, topic_entities)
        return retrieve(text, self.store, self.embedder, config, topics or None)

    def ask(
        self,
        question: str,
        topic_entities: list[str] | None = None,
        mode: Mode = "full",
        decode: Decode | None = None,
        **overrides,
    ) -> Answer:
        """``decode``: "ranked" (every candidate answer scored; answers are KG nodes) or
        "free" (the paper's greedy decoding); default: the pipeline's."""
        t0 = time.perf_counter()
        candidate = self.retrieve(question, topic_entities, **overrides)
        return self.answer(candidate, mode, decode, t0=t0)

    def answer(
        self,
        candidate: Candidate,
        mode: Mode = "full",
        decode: Decode | None = None,
        retriever: RetrieverModel | None = None,
        t0: float | None = None,
    ) -> Answer:
        """The language-model stages on a given S (``candidate``): what `ask` runs after
        retrieval, reused by reports that share one S between methods. ``retriever``: a
        `RetrieverModel` on this pipeline's base model to use instead of its own (the
        frozen-retriever ablation, another adapter); ``t0``: when the question arrived
        (``total`` counts from there; default: now)."""
        decode = decode or self.decode
        t0 = time.perf_counter() if t0 is None else t0
        question = candidate.question  # brackets removed
        timings = retrieval_timings(candidate)
        if mode == "retrieval":
            timings["total"] = (time.perf_counter() - t0) * 1000
            return Answer(question=question, candidate=candidate, timings_ms=timings)

        own_retriever, generator = self.models
        retriever = retriever or own_retriever
        selection = None
        if mode == "full":
            t = time.perf_counter()
            selection = retriever.select(question, candidate, lookup=self._lookup, decode=decode)
            timings["retriever"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        context = generator.context(question, candidate, selection)
        kg = kg_names(context, selection)
        ranked: list[RankedName] = []
        plan: list[PlannedPath] = []
        prior: dict[str, float] = {}
        via: dict[str, str] = {}
        raw = ""
        if decode == "ranked":
            # candidate answers: the context's KG nodes (and grounded out-of-S names); never
            # a name the KG does not hold
            if generator.task != "label":
                t_plan = time.perf_counter()
                plan, prior, via = self.plan(candidate)
                if plan:
                    self._join_planned(kg, prior)
                timings["planner"] = (time.perf_counter() - t_plan) * 1000
            names = None if generator.task == "label" else list(kg)
            scored = generator.rank(question, context, names)
            if plan:
                ranked, scored = self._rescored(scored, kg, prior, via)
            else:
                ranked = [RankedName(name=kg.get(x.name, (x.name, None))[0],
                                     score=round(x.score, 4), id=kg.get(x.name, (None, None))[1])
                          for x in scored]
            answers = [kg.get(x.name, (x.name, None))[0] for x in generator.choose(scored)]
        else:
            found, raw = generator.answer(question, context)
            answers = [kg.get(a, (a, None))[0] for a in found]  # the KG's casing where known
        timings["generator"] = (time.perf_counter() - t) * 1000 - timings.get("planner", 0.0)
        timings["total"] = (time.perf_counter() - t0) * 1000
        frozen = [r for r, m in (("retriever", retriever), ("generator", generator))
                  if m.frozen]
        return Answer(
            question=question,
            answer=answers,
            raw=raw,
            candidate=candidate,
            selection=selection,
            edges=[CandidateEdge.model_validate(e.model_dump()) for e in context.kg_edges],
            timings_ms=timings,
            decode=decode,
            ranked=ranked,
            frozen=frozen,
            generator=generator.kind,
            plan=plan,
        )

    def _join_planned(self, kg: dict[str, tuple[str, str]], prior: dict[str, float]) -> None:
        """Add to the candidate answers ``kg`` (prompt name -> (KG name, id)) the nodes the
        planned paths reach outside the context, likeliest first, at most the planner's
        `join_limit` (RoG's answers are the planned paths' ends; a node of S the retriever
        left out, or one past S, can then still be the answer)."""
        from talent_core.llm.parsing import clean_name

        model = self.planner
        have = {node for _, node in kg.values()}
        ids = sorted((i for i in prior if i not in have), key=lambda i: (-prior[i], i))
        for e in self.store.entities_by_id(ids[: model.join_limit if model else 0]):
            kg.setdefault(clean_name(e.name), (e.name, e.id))

    def _rescored(self, scored: list[Scored], kg: dict[str, tuple[str, str]],
                  prior: dict[str, float], via: dict[str, str]
                  ) -> tuple[list[RankedName], list[Scored]]:
        """Ranked answers re-weighted by the plan's prior (`planner.rescore`), best first."""
        from talent_core.llm.ranking import Scored
        from talent_core.retrieval.planner import rescore

        model = self.planner
        assert model is not None
        rows = []
        for x in scored:
            name, node = kg.get(x.name, (x.name, None))
            p = prior.get(node, 0.0) if node else 0.0
            rows.append((rescore(x.score, p, model.answer_weight, model.eps), x, name, node, p))
        rows.sort(key=lambda r: -r[0])
        ranked = [RankedName(name=name, score=round(s, 4), id=node, lm_score=round(x.score, 4),
                             prior=round(p, 4), path=via.get(node) if node else None)
                  for s, x, name, node, p in rows]
        return ranked, [Scored(x.name, s) for s, x, *_ in rows]

    def _lookup(self, names: list[str]) -> dict[str, Entity]:
        """Ground out-of-candidate names: normalised exact name match in the whole KG."""
        from talent_core.text import normalise_name

        found = self.store.entities_by_name(list(names))
        by_norm = {normalise_name(e.name): e for e in found}
        return {n: by_norm[normalise_name(n)] for n in names if normalise_name(n) in by_norm}

    def load(self, path: Path | str, fmt: str, **options) -> LoadReport:
        """Load a KG file into this pipeline's store (`loaders.api.load_path` options)."""
        from loaders.api import load_path

        return load_path(path, fmt, store=self.store, settings=self.settings, **options)

    def close(self) -> None:
        self.store.close()


def retrieval_timings(candidate: Candidate) -> dict[str, float]:
    """S's stage timings under the names an Answer reports them: ``retrieve_<stage>``."""
    return {f"retrieve_{k}": v for k, v in candidate.timings_ms.items()}


def kg_names(context: GraphView, selection: Selection | None) -> dict[str, tuple[str, str]]:
    """The prompt's lowercase name -> (the KG's name, KG id) for every KG node of the
    generator's context (`GraphView.answer_nodes` when its rows were cut to a text budget)
    and every grounded out-of-candidate name (pure)."""
    from talent_core.llm.parsing import clean_name

    out: dict[str, tuple[str, str]] = {}
    nodes = context.answer_nodes if context.answer_nodes is not None else context.kg_nodes
    for n in nodes:
        out.setdefault(clean_name(n.name), (n.name, n.id))
    for o in selection.out_of_candidate if selection else []:
        if o.grounded and o.id:
            out.setdefault(clean_name(o.name), (o.kg_name or o.name, o.id))
    return out


def bundled_adapters_dir(base_model: str) -> Path:
    """Where the shipped adapters for ``base_model`` live inside the package."""
    from talent_core.llm.models import canonical_name

    return Path(__file__).resolve().parent / "adapters" / canonical_name(base_model)


GENERATOR_ROLE_DIR = {"text": "generator", "graph-prompt": "generator-graph"}


def resolve_adapters(spec: str, base_model: str, generator_type: GeneratorType = "text"
                     ) -> tuple[Path | None, Path | None]:
    """(retriever dir, generator dir) for an adapter choice: "bundled", "none" or a
    directory holding retriever/ and generator/ (a missing one is the frozen model) and,
    for the "graph-prompt" generator, generator-graph/ (required: there is no frozen graph
    prompt)."""
    if spec == "none":
        if generator_type == "graph-prompt":
            raise FileNotFoundError("--adapters none: there is no untrained graph-prompt "
                                    "generator; give a trained one with --generator DIR")
        return None, None
    root = bundled_adapters_dir(base_model) if spec == "bundled" else Path(spec)
    if spec != "bundled" and not root.is_dir():
        raise FileNotFoundError(f"{root}: adapter directory not found (TALENT_ADAPTERS)")
    g_role = GENERATOR_ROLE_DIR[generator_type]
    found = tuple(root / role if (root / role / "talent_meta.json").is_file() else None
                  for role in ("retriever", g_role))
    if generator_type == "graph-prompt" and found[1] is None:
        raise FileNotFoundError(
            f"{root / g_role}: no trained graph-prompt generator for base model "
            f"{base_model!r}; train one (talent train generator --graph-prompt) and give it "
            "with --generator DIR")
    if spec == "bundled" and found == (None, None):
        log.warning("no bundled adapters for base model %r: the frozen base model answers",
                    base_model)
    return found  # type: ignore[return-value]
