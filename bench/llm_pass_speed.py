"""Forward-pass timings of the shipped MetaQA generator adapter on SmolLM2-135M: a random
prompt of T tokens through peft (unmerged) and merged (`llm.merged`), and ranked decoding's
prompt + N names as two passes (`prompt_pass` + `scores_over_cache`) and as one
(`scores_with_prompt`); medians of R repeats, the largest score / logit difference. Run it
on a quiet machine; the load is recorded.

    python bench/llm_pass_speed.py --out bench/results/llm_pass_speed.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from benchio import load_average, write_json_atomic

from talent_core.config import get_settings
from talent_core.llm import ranking
from talent_core.llm.lm import LoadedLM

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "talent_core/adapters/smollm2-135m-instruct/generator"


def median_s(f, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times), 4), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=413)
    ap.add_argument("--names", type=int, default=15)
    ap.add_argument("--name-tokens", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    before = load_average()
    settings = get_settings()
    peft = LoadedLM(adapters={"g": ADAPTER},
                    settings=settings.model_copy(update={"merged_adapters": 0}))
    merged = LoadedLM(adapters={"g": ADAPTER},
                      settings=settings.model_copy(update={"merged_adapters": 1}))
    torch.manual_seed(0)
    ids = torch.randint(100, 40000, (1, a.tokens))
    names = [torch.randint(100, 40000, (a.name_tokens,)).tolist() for _ in range(a.names)]
    ends = [peft.tokenizer.eos_token_id]
    out: dict = {"prompt_tokens": a.tokens, "names": a.names, "name_tokens": a.name_tokens,
                 "threads": torch.get_num_threads(), "repeats": a.repeats}

    def prompt(model):
        return model(input_ids=ids, use_cache=True, logits_to_keep=1).logits[0, -1]

    with peft.using("g") as m:
        out["prompt_pass_peft_s"], lp = median_s(lambda: prompt(m), a.repeats)
    with merged.using("g") as m:
        out["prompt_pass_merged_s"], lm_ = median_s(lambda: prompt(m), a.repeats)

        def two():
            first, layers, t = ranking.prompt_pass(m, ids)
            return ranking.scores_over_cache(m, first, layers, t, names, ends)

        out["two_passes_s"], s2 = median_s(two, a.repeats)
        out["one_pass_s"], s1 = median_s(
            lambda: ranking.scores_with_prompt(m, ids, names, ends)[0], a.repeats)
    out["max_logit_diff_merged"] = float((lp - lm_).abs().max())
    out["max_score_diff_one_pass"] = float((s2 - s1).abs().max())
    out["load_before"], out["load_after"] = before, load_average()
    print(json.dumps(out, indent=1))
    if a.out:
        write_json_atomic(a.out, out)


if __name__ == "__main__":
    main()
