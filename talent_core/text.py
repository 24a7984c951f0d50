"""Pure text helpers shared by the stores, loaders, retrieval, the LLM stages and metrics.

`normalise_name` is THE name key: `Entity.name_lc` is written with it and every name lookup
normalises its input with it, so loaders and queries can never disagree.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from talent_core.config import MAX_QUESTION_CHARS
from talent_core.errors import TextInputError

_SPACE = re.compile(r"\s+")
# Words for fulltext search: runs of letters/digits (any script); everything else separates.
_WORD = re.compile(r"[^\W_]+")
# A fuzzy query's term: a word, or words joined by "_" (an identifier, "repo_men"), which
# the stores' fulltext indexes keep as one token (neither RediSearch nor Lucene's standard
# tokenizer splits on "_"); the memory store indexes it whole too.
_TERM = re.compile(r"[^\W_]+(?:_+[^\W_]+)*")
# what an uploaded file's name keeps (`safe_upload_name`); a run of anything else is one "_"
_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9._-]+")
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
    return _tokens(_WORD, text, max_tokens)


def identifier_tokens(text: str) -> list[str]:
    """The lowercase identifier tokens of ``text``: words joined by "_" ("Daniel_OPARE" ->
    "daniel_opare"), what a fulltext index holds whole beside (memory store) or instead of
    (RediSearch, Lucene) its words."""
    return [t for t in _tokens(_TERM, text, 1 << 30) if "_" in t]


def identifier_token(text: str) -> str | None:
    """``text``'s words as one lowercase identifier token ("J. P. Morgan Jr." ->
    "j_p_morgan_jr"): the fuzzy read of a typed name on a KG that writes names so. None for
    fewer than two words."""
    words = _WORD.findall(normalise_name(text))
    return "_".join(words) if len(words) > 1 else None


def _tokens(pattern: re.Pattern[str], text: str, max_tokens: int) -> list[str]:
    seen: dict[str, None] = {}
    for tok in pattern.findall(normalise_name(text)):
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


# --- fuzzy names (entity linking) ----------------------------------------------------------
FUZZY_MAX_WORDS = 8  # words of a mention a fuzzy name query uses


def fuzzy_edits(word: str, words_in_mention: int = 1) -> int:
    """Edits a fuzzy name query allows for ``word``: none for words of <= 2 characters or
    holding a digit (years, numbers); in a multi-word mention (the other words narrow it)
    1 for 3 characters and 2 for longer words; alone, none up to 3 characters, 1 up to 5,
    else 2.

    >>> [fuzzy_edits(w) for w in ("tom", "1994", "heat", "amelie")]
    [0, 0, 1, 2]
    >>> [fuzzy_edits(w, 2) for w in ("de", "nro", "hanx")]
    [0, 1, 2]
    """
    if len(word) <= 2 or any(c.isdigit() for c in word):
        return 0
    if words_in_mention > 1:
        return 1 if len(word) == 3 else 2
    return 0 if len(word) == 3 else 1 if len(word) <= 5 else 2


def fuzzy_terms(text: str) -> list[tuple[str, int]]:
    """(word, edits allowed) for each word of ``text`` (as `search_tokens`, but words joined
    by "_" stay one term: an identifier; at most FUZZY_MAX_WORDS): what both stores' fuzzy
    name queries are built from."""
    words = _tokens(_TERM, text, FUZZY_MAX_WORDS)
    return [(w, fuzzy_edits(w, len(words))) for w in words]


def redisearch_fuzzy_query(text: str) -> str:
    """A RediSearch query matching names that hold EVERY word of ``text`` within its edits
    (`%w%` one edit, `%%w%%` two). Empty when no words; tokens are letters/digits only."""
    return " ".join("%" * n + w + "%" * n for w, n in fuzzy_terms(text))


def lucene_fuzzy_query(text: str) -> str:
    """A Lucene query matching names that hold EVERY word of ``text`` within its edits
    (`+w~1`, `+w~2`, `+w`). Empty when no words."""
    return " ".join(f"+{lucene_escape(w)}" + (f"~{n}" if n else "") for w, n in fuzzy_terms(text))


def fold_name(name: str) -> str:
    """A name for similarity: NFKD with combining marks removed (accents fold: "Amélie" ->
    "amelie"), casefolded, whitespace collapsed. Never a store key (see `normalise_name`).

    >>> fold_name("  Amélie  Poulain")
    'amelie poulain'
    """
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SPACE.sub(" ", bare.casefold()).strip()


def word_key(name: str) -> str:
    """A name's words (`fold_name`d), one space apart: underscores, dots, hyphens and the
    other punctuation only separate, so an identifier ("j_p_morgan_jr", "Daniel_OPARE") and
    the name as typed ("J. P. Morgan Jr.", "Daniel Opare") have one key.

    >>> word_key("J. P. Morgan Jr."), word_key("j_p_morgan_jr")
    ('j p morgan jr', 'j p morgan jr')
    """
    return " ".join(_WORD.findall(fold_name(name)))


def identifier_forms(name: str) -> list[str]:
    """Spellings of a typed name as a KG identifier (DBpedia/YAGO style: "_" for spaces), for
    exact name look-ups: the words joined by "_", then its word runs joined by "_"
    (punctuation dropped). Without the name itself; [] when it has no other spelling.

    >>> identifier_forms("J. P. Morgan Jr."), identifier_forms("Tigres UANL")
    (['J._P._Morgan_Jr.', 'J_P_Morgan_Jr'], ['Tigres_UANL'])
    """
    forms = ("_".join(name.split()), "_".join(_WORD.findall(name)))
    return [f for f in dict.fromkeys(forms) if f and f != name]


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment: insert, delete, substitute,
    or swap two adjacent characters, each one edit).

    >>> edit_distance("incepton", "inception"), edit_distance("incpetion", "inception")
    (1, 1)
    """
    if a == b:
        return 0
    if not a or not b:
        return len(a) + len(b)
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def within_edits(a: str, b: str, limit: int) -> bool:
    """`levenshtein(a, b) <= limit` (no swaps: what RediSearch's fuzzy terms allow), with a
    band so a scan over a vocabulary stays cheap."""
    if abs(len(a) - len(b)) > limit:
        return False
    if limit == 0 or a == b:
        return a == b
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        if min(cur) > limit:
            return False
        prev = cur
    return prev[-1] <= limit


def name_similarity(mention: str, name: str) -> tuple[float, int]:
    """(similarity in [0, 1], edits) of a mention and an entity name, both `fold_name`d:
    1 - Damerau-Levenshtein distance / the longer length. Case and accents do not count;
    one typo in a nine-letter name gives 0.89. Nor do separators: when either holds
    punctuation or "_", their `word_key`s count too (the better of the two), so
    "J. P. Morgan Jr." reads as "j_p_morgan_jr" with score 1.

    >>> name_similarity("Amelie", "Amélie"), name_similarity("tom hanx", "Tom Hanks")
    ((1.0, 0), (0.778, 2))
    >>> name_similarity("Daniel Opare", "Daniel_OPARE")
    (1.0, 0)
    """
    a, b = fold_name(mention), fold_name(name)
    best = _similarity(a, b)
    if best[1]:
        wa, wb = word_key(a), word_key(b)
        if wa and wb and (wa, wb) != (a, b):
            best = max(best, _similarity(wa, wb), key=lambda t: (t[0], -t[1]))
    return best


def _similarity(a: str, b: str) -> tuple[float, int]:
    d = edit_distance(a, b)
    return round(1.0 - d / max(len(a), len(b), 1), 3), d


# Characters no KG key or name may hold: C0/C1 control characters other than the five
# whitespace ones (tab, LF, VT, FF, CR) and lone surrogates. Why: FalkorDB's exact-match
# index uses U+0001 as its separator (a key holding it is stored but never found again, so
# every MERGE adds a duplicate), its query text ends at NUL, a lone surrogate cannot be
# encoded as UTF-8 for either store, and the others (ESC, DEL, ...) are terminal controls
# that no real KG text holds (MetaQA, WebQSP, ExplaGraphs: none).
_UNSAFE_CHAR = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# Shown escaped by `printable`: every control character (whitespace ones too), lone
# surrogates, and the invisible bidi/format controls that reorder or hide terminal text.
_NON_PRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)
_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def char_problem(text: str) -> str | None:
    """Why `text` cannot be stored as a KG key or name (a control character other than
    tab/LF/VT/FF/CR, or a lone surrogate), naming the first such character, or None."""
    m = _UNSAFE_CHAR.search(text)
    if m is None:
        return None
    cp = ord(m.group())
    kind = "a lone surrogate" if 0xD800 <= cp <= 0xDFFF else "a control character"
    what = "a NUL character" if cp == 0 else f"{kind} U+{cp:04X}"
    return f"contains {what} at position {m.start()}"


def key_problem(key: str) -> str | None:
    """Why `key` cannot be an entity id or a relation name, or None when it can.

    Keys are stored verbatim but must be non-empty, without leading/trailing whitespace and
    without the characters of `char_problem` (NUL, U+0001, other non-whitespace controls,
    lone surrogates): FalkorDB's exact-match index trims surrounding whitespace (so `"ab "`
    would MERGE into `"ab"`), splits on U+0001 and its query text ends at NUL. Both stores
    apply the same rule so the GraphStore contract is one; loaders reject such rows first."""
    if not key:
        return "is empty"
    if key != key.strip():
        return "has leading or trailing whitespace"
    return char_problem(key)


def printable(text: object, keep_newlines: bool = False) -> str:
    """`text` made safe to write to a terminal: control characters (ESC, CR, BEL, ...), lone
    surrogates and invisible bidi/format controls are shown as `\\xNN` / `\\uNNNN` escapes,
    so KG text can neither move the cursor, recolour, retitle or hide output, nor make
    `print` raise UnicodeEncodeError. Tab and newline are escaped too unless `keep_newlines`
    (multi-line output such as an error's context). Everything else is unchanged.

    >>> printable("Tom\\x1b[31m Hanks\\u202e")
    'Tom\\\\x1b[31m Hanks\\\\u202e'
    """
    s = text if isinstance(text, str) else str(text)

    def esc(m: re.Match[str]) -> str:
        c = m.group()
        if keep_newlines and c in "\n\t":
            return c
        if c in _SHORT_ESCAPES:
            return _SHORT_ESCAPES[c]
        cp = ord(c)
        return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"

    return _NON_PRINTABLE.sub(esc, s)


def printable_json(obj: object, **dumps: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False, **dumps)` safe for a terminal: what json leaves
    raw and `printable` escapes (C1 controls such as the 8-bit CSI U+009B, DEL, lone
    surrogates, bidi/format controls, U+2028) is written as a `\\uXXXX` JSON escape, so the
    output is the same JSON value, still readable (non-ASCII letters stay as they are), and
    always encodable."""
    text = json.dumps(obj, ensure_ascii=False, **dumps)
    return _NON_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def safe_upload_name(name: str | None, default: str = "upload") -> str:
    """The last path component of an uploaded file's name (either separator), reduced to
    [A-Za-z0-9._-], at most 120 characters, never empty, ``.``/``..`` or hidden; the
    extension is kept (formats are detected from it). The UI's and the HTTP API's uploads."""
    base = re.split(r"[\\/]", str(name or ""))[-1]
    return _UNSAFE_FILE.sub("_", base)[-120:].lstrip(".") or default


def check_question(text: str, max_chars: int = MAX_QUESTION_CHARS) -> str:
    """A user's question, stripped, or TextInputError with a clear one-line reason:
    empty, longer than `max_chars` characters (checked first, in O(1): a 100k-character
    question never reaches the tokenizer), not valid UTF-8 (command-line arguments with
    bad bytes arrive as lone surrogates, os.fsencode gives the bytes back), or holding a
    control character. Whitespace controls (tab, newline) are accepted."""
    if not isinstance(text, str):
        raise TextInputError(f"the question must be text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise TextInputError(
            f"the question is {len(text):,} characters long; the maximum is {max_chars:,}"
        )
    m = re.search(r"[\ud800-\udfff]", text)
    if m is not None:
        cp = ord(m.group())
        detail = (
            f"byte 0x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"lone surrogate U+{cp:04X}"
        )
        raise TextInputError(
            f"the question is not valid UTF-8 text ({detail} at character {m.start()})"
        )
    problem = char_problem(text)
    if problem is not None:
        raise TextInputError(f"the question {problem}")
    text = text.strip()
    if not text:
        raise TextInputError("the question is empty")
    return text


def check_topics(names: list[str] | None, max_count: int,
                 max_chars: int = MAX_QUESTION_CHARS) -> list[str] | None:
    """Topic entities a user named beside the question, each checked as a question is
    (`check_question`: text, length, UTF-8, control characters) and at most ``max_count`` of
    them; TextInputError naming the entry. None stays None."""
    if names is None:
        return None
    if not isinstance(names, list):
        raise TextInputError(f"topic entities must be a list, got {type(names).__name__}")
    if len(names) > max_count:
        raise TextInputError(f"{len(names):,} topic entities; the maximum is {max_count:,}")
    out = []
    for i, name in enumerate(names, 1):
        try:
            out.append(check_question(name, max_chars))
        except TextInputError as e:
            raise TextInputError(f"topic entity {i}: "
                                 + str(e).replace("the question", "the name")) from None
    return out


def answer_key(name: str) -> str:
    """The key names are COMPARED by (answers vs gold, LLM output vs S): NFKC, casefold,
    strip, collapse whitespace.

    Deliberately looser than the store's lookup key `normalise_name`
    (NFC + lower), which must equal what Cypher's `toLower` stores in `name_lc`: a
    comparison may fold full-width letters and "ß" -> "ss", a database key may not."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()
