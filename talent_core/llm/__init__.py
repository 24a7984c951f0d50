"""TaLenT's LLM stages: the learnable retriever R_theta and the generator G_phi.

Modules (one concern each; the first seven are pure and need no model):
  prompts    Appendix E.1/E.2 texts and chat rendering (Llama-2 [INST] form when needed)
  textualise Appendix E CSV writer (and the "named" variant): pure
  context    what the models see: S (with truncation) and the eq. 14 generator context
  targets    P / W target line with per-name character spans (eqs. 9-11), generator target
  loss       token weights from offsets, token-weighted NLL (eqs. 12-13)
  parsing    one-line ``a|b|c`` output -> names -> nodes of S / out-of-candidate (grounded)
  features   prompt + target tokenised together, weighted, truncated to fit
  data       TrainingExample records (JSONL)
  models     base model loading (SmolLM2 GGUF alias), LoRA, adapter save/load + metadata
  lm         LoadedLM (one base model, several named adapters), Role
  ranking    ranked decoding: candidate names scored over one KV-cached prompt
  retriever  RetrieverModel.select / rank (free or ranked V-hat)
  generator  GeneratorModel.context / rank / answer
  loading    load_models: both roles on one base model
  graph_prompt  G-Retriever's graph soft prompt (its torch module: gnn, imported when used)
  explagraphs  ExplaGraphs records and LLM pseudo-gold annotation (Appendix A.2)

Training (the loops, their data, ranked-decoding tuning) is in `talent_core.training`; the
commands in `talent_core.commands`.

Nothing heavy (torch, transformers) is imported by importing this package.
"""
