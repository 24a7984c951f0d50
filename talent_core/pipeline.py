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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from talent_core.answer import Mode, StageHook
from talent_core.answer import answer as answer_stage
from talent_core.config import Settings, get_settings
from talent_core.conversation import known_turns, read_follow_up, referring_words, rephrase
from talent_core.embedding import Embedder, get_embedder
from talent_core.models import (
    Answer,
    Candidate,
    Decode,
    Entity,
    GeneratorType,
    Reading,
    StoreStats,
    Turn,
)
from talent_core.operators import recognise
from talent_core.operators.run import answered_in_store
from talent_core.planning import Plan, join_plan, plan_paths
from talent_core.planning.plan import MatcherPlanner, reading_scorer, resolve
from talent_core.questions import FORMAT_STOPWORDS, QuestionFormat, parse_question
from talent_core.retrieval import RetrievalConfig, retrieve
from talent_core.retrieval.config import apply_overrides
from talent_core.retrieval.linking import not_in_kg, read_as_linked
from talent_core.retrieval.seeds import text_seeds
from talent_core.store import GraphStore, open_store
from talent_core.text import check_question, check_topics

if TYPE_CHECKING:
    from talent_core.llm.generator import GeneratorModel
    from talent_core.llm.lm import Stage
    from talent_core.llm.retriever import RetrieverModel
    from talent_core.loaders import LoadReport

log = logging.getLogger(__name__)


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
        relation-path planner of ranked answers, "bundled" (a shipped planner that fits the
        store, else zero-shot), "zero-shot", "none" or a directory (default
        `settings.planner`)."""
        self.settings = settings or get_settings()
        if store is None:  # a killed unload is finished before anything here reads the store
            from talent_core.loaders.sources import open_resumed

            store = open_resumed(self.settings, open_store(self.settings))
        self.store = store
        self._embedder = embedder
        self.retrieval = retrieval or RetrievalConfig()
        self.question_format: QuestionFormat = question_format or self.settings.question_format
        self.base_model = base_model
        spec = adapters or self.settings.adapters
        self.adapters_spec = spec  # the stance task reads it (`stance.label_models`)
        self.frozen_retriever = frozen_retriever
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
        if (self.planner_spec not in ("bundled", "zero-shot", "none")
                and not Path(self.planner_spec).is_dir()):
            raise FileNotFoundError(f"{self.planner_spec}: planner directory not found "
                                    "(TALENT_PLANNER: bundled, zero-shot, none or a directory)")
        self._planner: tuple[MatcherPlanner | None] | None = None  # (planner,) once loaded
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
    def planner(self) -> MatcherPlanner | None:
        """The relation-path planner ranked answers use (None: off), loaded once."""
        if self._planner is None:
            self._planner = (resolve(self.planner_spec, self.settings.embedding_model,
                                     self.embedder, self.settings.data_dir),)
        return self._planner[0]

    def plan(self, candidate: Candidate) -> Plan:
        """The planned relation paths from ``candidate``'s anchors (`planning.plan_paths`)."""
        return plan_paths(self.planner, self.store, candidate)

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

    def use_models(self, retriever: RetrieverModel, generator: GeneratorModel,
                   adapters: bool = True) -> None:
        """Answer with these models from now on (e.g. the frozen base model prompted for
        another task, on the same loaded weights); ``adapters`` False: they carry none, and
        the pipeline no longer names adapter directories."""
        self._models = (retriever, generator)
        if not adapters:
            self.retriever_dir = self.generator_dir = None

    def load_models(self, on_stage: Stage | None = None
                    ) -> tuple[RetrieverModel, GeneratorModel]:
        """`models`, with ``on_stage(what, done, total)`` called as loading proceeds."""
        if self._models is None:
            from talent_core.llm.loading import load_models

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
        return self.retrieve_planned(question, topic_entities, **overrides)[0]

    def retrieve_planned(
        self, question: str, topic_entities: list[str] | None = None,
        history: Sequence[Turn] = (), **overrides
    ) -> tuple[Candidate, Plan | None]:
        """`retrieve`, and the plan whose ends joined S (None: nothing was planned), so
        that `answer` need not plan again. ``history``: the turns a follow-up may refer to,
        oldest first (`conversation`); a question with topic entities of its own is read
        without them."""
        with self._answering():
            return self._retrieve_planned(question, topic_entities, history, **overrides)

    def _answering(self):
        """Held while this pipeline answers: a vector fill behind it gives way
        (`store._common.answering`)."""
        from talent_core.store._common import answering, job_dir

        return answering(job_dir(self.store, self.settings))

    def _retrieve_planned(
        self, question: str, topic_entities: list[str] | None, history: Sequence[Turn],
        **overrides
    ) -> tuple[Candidate, Plan | None]:
        config = self.retrieval_config(**overrides)
        question = check_question(question, self.settings.max_question_chars)
        topic_entities = check_topics(topic_entities, self.settings.max_topic_entities,
                                      self.settings.max_question_chars)
        asked = None if topic_entities else rephrase(question, history)
        if asked is not None:  # "what about [Titanic]?": the previous question about it
            typed, question = question, check_question(asked, self.settings.max_question_chars)
        operation = recognise(question)
        text, topics = parse_question(operation.base if operation else question,
                                      topic_entities)
        reading = None if topics else self.read_follow_up(text, history)
        candidate = read_as_linked(retrieve(
            text, self.store, self.embedder, config, topics or None,
            referents=reading.entities if reading else ()))
        if reading is None and asked is not None:
            reading = Reading(words=typed.strip(), source="question", asked_as=asked)
        candidate.reading = reading
        candidate.operation = operation
        if not (config.plan_join and self.planner is not None and candidate.anchors):
            return candidate, None
        if answered_in_store(candidate):
            return candidate, None  # the operator plans from each entity, S needs no join
        t = time.perf_counter()
        plan = self.plan(candidate)
        candidate = join_plan(self.store, candidate, plan, config.plan_join)
        candidate.timings_ms["plan_join"] = (time.perf_counter() - t) * 1000
        return candidate, plan

    def read_follow_up(self, question: str, history: Sequence[Turn]) -> Reading | None:
        """How ``question`` refers to the turns of ``history`` (`conversation.read_follow_up`;
        the planner's score decides between readings whose number agrees)."""
        ref = referring_words(question) if history else None
        if ref is None:
            return None
        history = known_turns(history, self.store.entities_by_id)
        planner = self.planner
        score = (None if planner is None
                 else reading_scorer(planner, self.store, question, ref[0]))
        return read_follow_up(question, history, score)

    def anchors_of(self, question: str, history: Sequence[Turn] = ()) -> list[Entity]:
        """The entities ``question`` is about, without retrieving S: a follow-up's reading,
        else its linked mentions (what an earlier question of a chat history is read back
        as)."""
        config = self.retrieval_config()
        question = rephrase(question, history) or question
        text, topics = parse_question(check_question(question,
                                                     self.settings.max_question_chars))
        reading = None if topics else self.read_follow_up(text, history)
        if reading is not None:
            return reading.entities
        seeds = text_seeds(text, self.store, topics or None, name_match=config.name_match,
                           fulltext_k=0, stopwords=config.stopwords,
                           fuzzy_link=config.fuzzy_link, link_threshold=config.link_threshold)
        return [Entity(id=s.id, name=s.name) for s in seeds.anchors()]

    def ask(
        self,
        question: str,
        topic_entities: list[str] | None = None,
        mode: Mode = "full",
        decode: Decode | None = None,
        history: Sequence[Turn] = (),
        **overrides,
    ) -> Answer:
        """``decode``: "ranked" (every candidate answer scored; answers are KG nodes) or
        "free" (the paper's greedy decoding); default: the pipeline's. ``history``: the
        turns a follow-up may refer to, oldest first (`conversation.turn_of` of each answer)."""
        t0 = time.perf_counter()
        candidate, plan = self.retrieve_planned(question, topic_entities, history,
                                                **overrides)
        return self.answer(candidate, mode, decode, t0=t0, plan=plan)

    def answer(
        self,
        candidate: Candidate,
        mode: Mode = "full",
        decode: Decode | None = None,
        retriever: RetrieverModel | None = None,
        t0: float | None = None,
        plan: Plan | None = None,
        on_stage: StageHook | None = None,
    ) -> Answer:
        """The language-model stages on a given S (``candidate``): what `ask` runs after
        retrieval, reused by reports that share one S between methods (`answer.answer`).
        ``retriever``: a `RetrieverModel` on this pipeline's base model to use instead of its
        own (the frozen-retriever ablation, another adapter); ``t0``: when the question
        arrived (``total`` counts from there; default: now); ``plan``: the plan
        `retrieve_planned` made for ``candidate`` (else planned here); ``on_stage``: called
        as each language-model stage ends (`answer.answer`). A mention the linking left
        unlinked (`linking.not_in_kg`) skips the language models: the answer is empty and
        says which mentions are "not in the KG"."""
        decode = decode or self.decode
        t0 = time.perf_counter() if t0 is None else t0
        missing = not_in_kg(candidate.links)
        if mode == "retrieval" or missing:
            out = answer_stage(candidate, "retrieval", decode, None, None, self.store, t0=t0)
            out.not_in_kg = missing
            return out
        with self._answering():  # loading the models on a first question too
            own_retriever, generator = self.models
            ranked = decode == "ranked" and generator.task != "label"
            return answer_stage(candidate, mode, decode, retriever or own_retriever, generator,
                                self.store, planner=self.planner if ranked else None, t0=t0,
                                answer_set_rule=self.settings.answer_set, made=plan,
                                on_stage=on_stage)

    def load(self, path: Path | str, fmt: str, **options) -> LoadReport:
        """Load a KG file into this pipeline's store (`loaders.api.load_path` options)."""
        from talent_core.loaders.api import load_path

        return load_path(path, fmt, store=self.store, settings=self.settings, **options)

    def close(self) -> None:
        self.store.close()


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
