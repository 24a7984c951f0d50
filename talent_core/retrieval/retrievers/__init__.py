"""The retriever plug-ins: one module per retriever, each defining ``RETRIEVER`` (a
`talent_core.retrieval.plugin.Retriever`). `talent_core.retrieval.registry` finds every
module here, so adding a retriever is adding a module (and its test)."""
