"""TaLenT GraphQA: pipeline library (store, retrieval, LLM retriever/generator)."""

__version__ = "0.1.0"
