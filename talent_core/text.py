"""Pure text helpers shared by the stores, loaders, retrieval, the LLM stages and metrics.

`normalise_name` is THE name key: `Entity.name_lc` is written with it and every name lookup
normalises its input with it, so loaders and queries can never disagree.
"""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")
# Words for fulltext search: runs of letters/digits (any script); everything else separates.
_WORD = re.compile(r"[^\W_]+")
# Lucene query-parser syntax characters (Neo4j fulltext). `&&`/`||` are covered by & and |.
_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')


def normalise_name(name: str) -> str:
    """Lowercase, Unicode NFC, stripped, internal whitespace collapsed to one space.

    `str.lower` (not casefold) so the key matches what Cypher's `toLower` and the fulltext
    tokenizers produce.

    >>> normalise_name("  The   Matrix\\tRELOADED ")
    'the matrix reloaded'
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFC", name).lower()).strip()


def search_tokens(text: str, max_tokens: int = 32) -> list[str]:
    """Lowercase word tokens of free text (deduplicated, order kept), for fulltext queries."""
    seen: dict[str, None] = {}
    for tok in _WORD.findall(normalise_name(text)):
        seen.setdefault(tok, None)
        if len(seen) >= max_tokens:
            break
    return list(seen)


def lucene_escape(token: str) -> str:
    """Backslash-escape Lucene query syntax characters."""
    return _LUCENE_SPECIAL.sub(r"\\\1", token)


def lucene_query(text: str) -> str:
    """A Lucene query matching ANY word of `text` (Neo4j fulltext). Empty when no words.

    Tokens are lowercase, so the operators AND/OR/NOT can never appear; special characters
    are escaped as well (defence in depth). The result is passed as a query PARAMETER."""
    return " ".join(lucene_escape(t) for t in search_tokens(text))


def redisearch_query(text: str) -> str:
    """A RediSearch query matching ANY word of `text` (FalkorDB fulltext). Empty when no words.

    Tokens are runs of letters/digits only, so no RediSearch syntax can get through."""
    return " | ".join(search_tokens(text))


def key_problem(key: str) -> str | None:
    """Why `key` cannot be an entity id or a relation name, or None when it can.

    Keys are stored verbatim but must be non-empty, without leading/trailing whitespace and
    without NUL: FalkorDB's exact-match index trims surrounding whitespace (so `"ab "` would
    MERGE into `"ab"`) and its query text ends at NUL. Both stores apply the same rule so
    the GraphStore contract is one; loaders should reject or strip such keys first."""
    if not key:
        return "is empty"
    if key != key.strip():
        return "has leading or trailing whitespace"
    if "\x00" in key:
        return "contains a NUL character"
    return None


def answer_key(name: str) -> str:
    """The key names are COMPARED by (answers vs gold, LLM output vs S): NFKC, casefold,
    strip, collapse whitespace.

    Deliberately looser than the store's lookup key `normalise_name`
    (NFC + lower), which must equal what Cypher's `toLower` stores in `name_lc`: a
    comparison may fold full-width letters and "ß" -> "ss", a database key may not."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()
