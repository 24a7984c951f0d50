"""Training: every training loop and its data building, as library functions that the
`talent train ...` commands call (LoRA retriever/generator, graph prompt, planner, SubgraphRAG
scorer)."""
