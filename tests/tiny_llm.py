"""A tiny randomly initialised Llama model with an offline tokenizer, for fast tests.

`tiny_llama(dir)` writes a ``LlamaForCausalLM`` (hidden 32, 2 layers, ~50k parameters) and a
byte-level BPE tokenizer trained with ``tokenizers`` on a few lines of prompt-like text (so
names split into several tokens and offsets are real), with a ChatML chat template like
SmolLM2's. Nothing is downloaded. Its output is garbage; the code paths are real.
"""

from __future__ import annotations

from pathlib import Path

from talent_core.llm.prompts import GENERATOR_SYSTEM, RETRIEVER_SYSTEM
from talent_core.models import Candidate, CandidateEdge, CandidateNode

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    RETRIEVER_SYSTEM,
    GENERATOR_SYSTEM,
    "Question:\nwho directed the movie titanic\nSubgraph (CSV between <DESC> tags):",
    "<DESC>\nnode_id,node_attr\n0,titanic\n1,james cameron\n2,leonardo dicaprio\n3,1997\n",
    "src,edge_attr,dst\n0,directed_by,1\n0,starred_actors,2\n0,release_year,3\n</DESC>",
    "james cameron|titanic|leonardo dicaprio|kate winslet|1997|english|drama|romance",
    "what movies are about ginger rogers|which person wrote the films directed by",
    "john f. kennedy|inaugural address of john f. kennedy|washington d.c.|united states",
    "Argument 1: cannabis should be legal. Argument 2: support counter each other",
    "titanic|(500) days of summer|(a)|(b)|(c)|(d)|(e)|(f)",  # teaches the merge "|("
]


def tiny_tokenizer(vocab_size: int = 400):
    """Byte-level BPE (offsets, any text) with ChatML special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>",
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def tiny_llama(out_dir: Path | str, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """Write a tiny random LlamaForCausalLM + tokenizer to ``out_dir``; returns the path."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8192, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tiny_adapters(tiny_dir: Path, root: Path, cache_dir: Path, seed: int, std: float,
                  **meta) -> dict[str, Path]:
    """A retriever and a generator adapter of the tiny model with non-zero LoRA weights
    (LoRA B starts at 0: an untouched adapter changes nothing), saved as ``root/<kind>``;
    ``meta``: more `meta_for` fields (task, dataset, ...). Seeds ``seed`` and ``seed + 1``."""
    import torch

    from talent_core.config import Settings
    from talent_core.llm.models import add_lora, load_base, lora_config, meta_for, save_adapter

    settings = Settings(model_cache_dir=cache_dir, _env_file=None)
    out = {}
    for i, kind in enumerate(("retriever", "generator")):
        model, _, _ = load_base(str(tiny_dir), settings)
        model = add_lora(model, lora_config())
        torch.manual_seed(seed + i)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, std)
        out[kind] = save_adapter(model, root / kind, meta_for(model, kind, max_length=2048,
                                                              **meta))
    return out


def sample_candidate() -> Candidate:
    """A small S (6 movie-KG nodes, 5 edges) for tests."""

    nodes = [
        CandidateNode(id="m:titanic", name="Titanic", seed=True, prize=5.0),
        CandidateNode(id="p:cameron", name="James Cameron", prize=4.0),
        CandidateNode(id="p:dicaprio", name="Leonardo DiCaprio", prize=3.0),
        CandidateNode(id="y:1997", name="1997", prize=2.0),
        CandidateNode(id="m:avatar", name="Avatar", prize=1.0),
        CandidateNode(id="l:en", name="English", prize=0.0),
    ]
    edges = [
        CandidateEdge(src="m:titanic", rel="directed_by", dst="p:cameron", prize=3.0),
        CandidateEdge(src="m:titanic", rel="starred_actors", dst="p:dicaprio", prize=2.0),
        CandidateEdge(src="m:titanic", rel="release_year", dst="y:1997", prize=1.0),
        CandidateEdge(src="m:avatar", rel="directed_by", dst="p:cameron", prize=0.5),
        CandidateEdge(src="m:avatar", rel="in_language", dst="l:en", prize=0.0),
    ]
    return Candidate(question="who directed [Titanic]", nodes=nodes, edges=edges)


def sample_examples(n: int = 3) -> list:
    """``n`` training examples on `sample_candidate` (three questions in turn)."""
    from talent_core.llm.data import TrainingExample

    c = sample_candidate()
    qs = ["who directed [Titanic]", "who starred in [Titanic]", "when was [Titanic] released"]
    answers = [["James Cameron"], ["Leonardo DiCaprio"], ["1997"]]
    return [TrainingExample(question=qs[i % 3], candidate=c.model_copy(update={
        "question": qs[i % 3]}), answers=answers[i % 3]) for i in range(n)]
