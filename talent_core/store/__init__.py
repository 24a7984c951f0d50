"""Graph stores behind one contract (base.py): embedded FalkorDB (default), Neo4j
(production) and the in-memory reference store (memory.py, read side)."""

from __future__ import annotations

from talent_core.config import Settings, get_settings
from talent_core.store.base import ExpansionCaps, GraphReader, GraphStore, GraphWriter


def open_store(settings: Settings | None = None) -> GraphStore:
    """Open the store the settings select (`TALENT_STORE`)."""
    settings = settings or get_settings()
    if settings.store == "neo4j":
        from talent_core.store.neo4j import Neo4jStore

        return Neo4jStore.from_settings(settings)
    from talent_core.store.falkordb import FalkorDBStore

    return FalkorDBStore.from_settings(settings)


__all__ = ["ExpansionCaps", "GraphReader", "GraphStore", "GraphWriter", "open_store"]
