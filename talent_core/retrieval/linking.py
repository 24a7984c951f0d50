"""Entity linking: which KG entity each mention of a question names, or that none does.

A mention is a [bracketed] topic, or (without brackets) a word span of the question. Its
candidates are the exact normalised-name matches plus the store's fuzzy name search
(`GraphReader.fuzzy_names`: every word within one or two edits), each scored by
`text.name_similarity`: 1 - Damerau-Levenshtein distance / the longer length over names
folded by case and accents (NFKD without combining marks), so "Amelie" reads as "Amélie"
with score 1 and "Incepton" as "Inception" with 0.89. Edit distance rather than trigrams
because the typos to forgive are single edits, and a trigram overlap punishes an edit in a
short name far more than one in a long name.

A mention links when its best candidate is an exact name, or is within the mention's edits
(`allowed_edits`: none up to 3 characters, 1 up to 5 or for one word, else 2: a name more
than two edits from every KG name never links) and scores at least the threshold
(`RetrievalConfig.link_threshold`). Without brackets, when some fuzzy-linked span is
capitalised only those count (a name, not a question word like "directed" ~ "Redirected").
Candidates within `LINK_MARGIN` of the chosen one are kept as alternatives ("did you
mean"); an unlinked mention keeps the closest names; a name several entities share links
to all of them (`Link.shared`: the others' ids, said to the user).

Identifier-style KGs (DBpedia/YAGO: "Daniel_OPARE", "j_p_morgan_jr"): a mention also names
the entities stored under its identifier forms (`text.identifier_forms`: "Daniel Opare" ->
"Daniel_Opare", "J. P. Morgan Jr." -> "J_P_Morgan_Jr"; `name_keys`), an exact link that
keeps the KG's name for display; at query time, so a loaded store needs no reload. The
similarity ignores separators ("_", dots: `text.word_key`) and the fuzzy read also asks for
the identifier token, which the stores' fulltext indexes keep whole (`fuzzy_candidates`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from talent_core.models import Candidate, Entity, Link, LinkAlternative
from talent_core.store.base import GraphReader
from talent_core.text import (
    fold_name,
    identifier_forms,
    identifier_token,
    name_similarity,
    normalise_name,
    search_tokens,
)

log = logging.getLogger(__name__)

LINK_MARGIN = 0.05  # candidates this close to the chosen one are shown as alternatives
FUZZY_K = 100  # fuzzy name hits read per mention (one word may be in many names)
CLOSEST = 5  # closest names kept for an unlinked mention
ALTERNATIVES = 3
EDGE_PUNCT = "\"'“”‘’`.,;:!?()[]{}"  # stripped from a span's edges (as `seeds` does)
ARTICLES = frozenset(["the", "a", "an"])  # may lead a fuzzy span: titles start with them


def lookup_names(text: str) -> list[str]:
    """The names to look ``text`` up under (`GraphReader.entities_by_name`): itself, then
    its identifier forms ("Daniel Opare" -> "Daniel_Opare")."""
    return [text, *identifier_forms(text)]


def name_keys(text: str) -> list[str]:
    """The name keys (`normalise_name`) of `lookup_names`, in order, each once."""
    return list(dict.fromkeys(normalise_name(n) for n in lookup_names(text)))


def by_name_key(entities: Iterable[Entity]) -> dict[str, list[Entity]]:
    """Entities grouped by the name key of their KG name."""
    out: dict[str, list[Entity]] = {}
    for e in entities:
        out.setdefault(normalise_name(e.name), []).append(e)
    return out


def named_by(text: str, by_name: Mapping[str, list[Entity]]) -> list[Entity]:
    """The entities of ``by_name`` (`by_name_key`) that ``text`` names exactly: those of its
    own key, else of its first identifier form some KG name holds; [] when none."""
    for key in name_keys(text):
        if key in by_name:
            return by_name[key]
    return []


def allowed_edits(mention: str) -> int:
    """The edits (after folding case and accents) a mention may differ from the name it
    links to: 0 for up to 3 characters, 1 for 4-5 or a single word (one typo), else 2."""
    folded = fold_name(mention)
    n = len(folded)
    return 0 if n <= 3 else 1 if n <= 5 or " " not in folded else 2


def fuzzy_candidates(store: GraphReader, mention: str, k: int = FUZZY_K,
                     read: Callable[[str], list[Entity]] | None = None) -> list[Entity]:
    """The store's fuzzy name hits for ``mention``; when the mention's short words (<= 3
    characters) may hold the typo ("Kne Curtis", "Te Emperor Waltz"), also the hits of
    its longer words alone; and those of its words as one identifier ("Danel Opare" ->
    "danel_opare", which finds "Daniel_OPARE"), or of an identifier's words ("Tom_Hanks"
    -> "tom hanks"). ``read``: the look-up to use (a memo of `fuzzy_names`)."""
    read = read or (lambda text: store.fuzzy_names(text, k))
    hits = list(read(mention))
    words = mention.split()
    longer = [w for w in words if len(fold_name(w)) > 3]
    if longer and len(longer) < len(words):
        hits += read(" ".join(longer))
    token = identifier_token(mention)
    if token and len(words) > 1:
        hits += read(token)
    elif token and "_" in mention:
        hits += read(" ".join(search_tokens(mention)))
    return hits


def _scored(mention: str, entities: Iterable[Entity]) -> list[tuple[float, int, Entity]]:
    """(similarity, edits, entity) for each distinct entity, best first."""
    seen: dict[str, Entity] = {}
    for e in entities:
        seen.setdefault(e.id, e)
    out = [(*name_similarity(mention, e.name), e) for e in seen.values()]
    out.sort(key=lambda t: (-t[0], t[1], len(t[2].name), t[2].id))
    return out


def choose(mention: str, exact: Sequence[Entity], fuzzy: Sequence[Entity], threshold: float,
           topic: bool = False) -> tuple[Link, list[str]]:
    """The Link for ``mention`` from its exact and fuzzy candidates (pure), and the ids it
    anchors: every entity of the chosen name (a KG may hold one name twice)."""
    exact = named_by(mention, by_name_key(exact))
    if exact:
        ids = list(dict.fromkeys(e.id for e in exact))
        alts = [e for e in _scored(mention, fuzzy) if e[2].id not in ids and e[0] >= 1.0]
        return Link(mention=mention, id=ids[0], name=exact[0].name, score=1.0, how="exact",
                    topic=topic, alternatives=_alternatives(alts), shared=ids[1:]), ids
    scored = _scored(mention, fuzzy)
    limit = allowed_edits(mention)
    ok = [t for t in scored if t[1] <= limit and t[0] >= threshold]
    if not ok:
        closest = list(dict.fromkeys(e.name for _, _, e in scored))[:CLOSEST]
        return Link(mention=mention, topic=topic, closest=closest), []
    score, _, best = ok[0]
    same = fold_name(best.name)
    ids = [e.id for _, _, e in ok if fold_name(e.name) == same]
    alts = [t for t in ok if fold_name(t[2].name) != same and t[0] >= score - LINK_MARGIN]
    return Link(mention=mention, id=best.id, name=best.name, score=score, how="fuzzy",
                topic=topic, alternatives=_alternatives(alts),
                shared=[i for i in ids if i != best.id]), ids


def _alternatives(scored: Sequence[tuple[float, int, Entity]]) -> list[LinkAlternative]:
    return [LinkAlternative(id=e.id, name=e.name, score=s) for s, _, e in scored[:ALTERNATIVES]]


def link_mention(store: GraphReader, mention: str, threshold: float, topic: bool = False,
                 exact: Sequence[Entity] | None = None, k: int = FUZZY_K
                 ) -> tuple[Link, list[str]]:
    """`choose` over the store's candidates for one mention (``exact``: its exact-name
    matches when already looked up); an unlinked one also gets the plain fulltext hits
    as closest names."""
    if exact is None:
        exact = named_by(mention, by_name_key(store.entities_by_name(lookup_names(mention))))
    fuzzy = [] if exact else fuzzy_candidates(store, mention, k)
    link, ids = choose(mention, exact, fuzzy, threshold, topic)
    if not link.linked:
        near = _scored(mention, [*fuzzy, *store.search_names(mention, k)])
        link.closest = list(dict.fromkeys(e.name for _, _, e in near))[:CLOSEST]
    return link, ids


def link_topics(store: GraphReader, topics: Sequence[str], found: Sequence[Entity],
                threshold: float, fuzzy: bool = True) -> list[tuple[Link, list[str]]]:
    """One Link per topic: exact when ``found`` (the topics' exact name / id matches) holds
    it, else (``fuzzy``) a fuzzy link or none."""
    by_name = by_name_key(found)
    by_id = {e.id: e for e in found}
    out = []
    for t in topics:
        if hits := named_by(t, by_name):
            out.append(choose(t, hits, [], threshold, topic=True))
        elif t in by_id:
            e = by_id[t]
            out.append((Link(mention=t, id=e.id, name=e.name, score=1.0, how="id",
                             topic=True), [e.id]))
        elif fuzzy:
            out.append(link_mention(store, t, threshold, topic=True, exact=[]))
        else:
            out.append((Link(mention=t, topic=True), []))
    return out


def _clean(word: str) -> str:
    return word.strip(EDGE_PUNCT).lower()


def fuzzy_spans(question: str, stopwords: Collection[str], covered: Sequence[bool],
                max_n: int = 6) -> list[tuple[int, int, str]]:
    """(start, end, text) word spans worth a fuzzy look-up, longest first: no stopword at
    either edge (but an article may lead: "the matrx"), no covered word, more than 3
    characters."""
    words = question.split()
    out = []
    for n in range(min(max_n, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            part = words[i: i + n]
            first = _clean(part[0])
            if any(covered[i: i + n]) or _clean(part[-1]) in stopwords or (
                    first in stopwords and (n == 1 or first not in ARTICLES)):
                continue
            text = " ".join(part).strip(EDGE_PUNCT)
            if text.endswith(("'s", "’s")):
                text = text[:-2]
            if len(fold_name(text)) > 3:
                out.append((i, i + n, text))
    return out


def link_spans(store: GraphReader, question: str, stopwords: Collection[str],
               threshold: float, covered: Sequence[bool] | None = None
               ) -> list[tuple[Link, list[str], int, int, int]]:
    """Fuzzy links of the question's word spans, longest first, not overlapping each other
    or the ``covered`` words: (Link, ids, words in the span, start, end)."""
    words = question.split()
    used = list(covered) if covered is not None else [False] * len(words)
    memo: dict[str, list[Entity]] = {}

    def read(text: str) -> list[Entity]:
        if text not in memo:
            memo[text] = store.fuzzy_names(text, FUZZY_K)
        return memo[text]

    # a word of >= 6 letters has two edits alone as in any span: when no name holds it as
    # a word, only an identifier can hold it ("Daniel_OPARE" is one token to the database
    # indexes), so a span holding it gets that one read (a made-up name: one per span)
    dead = {i for i, w in enumerate(words) if len(_clean(w)) >= 6 and _clean(w) not in
            stopwords and not read(_clean(w))}
    out = []
    for i, j, text in fuzzy_spans(question, stopwords, used):
        if any(used[i:j]):
            continue
        if dead.intersection(range(i, j)):  # a name's span ("Skjoldbjaerg") may still be one
            token = identifier_token(text) if j - i > 1 and _capitalised(text) else None
            fuzzy = read(token) if token else []
        else:
            fuzzy = fuzzy_candidates(store, text, read=read)
        if not fuzzy:
            continue
        link, ids = choose(text, [], fuzzy, threshold)
        if link.linked:
            used[i:j] = [True] * (j - i)
            out.append((link, ids, j - i, i, j))
    named = [t for t in out if _capitalised(t[0].mention)]
    return named or out  # a capitalised mention is a name; "directed" ~ "Redirected" is not


def _capitalised(text: str) -> bool:
    return any(c.isupper() for c in text)


def unlinked_mentions(store: GraphReader, question: str, stopwords: Collection[str],
                      covered: Sequence[bool] | None = None) -> list[Link]:
    """The question's runs of non-stopword words (not ``covered``) as unlinked Links with
    the closest names: what "not in the KG" names when no span linked."""
    words = question.split()
    covered = covered or [False] * len(words)
    runs: list[list[str]] = [[]]
    for w, c in zip(words, covered, strict=True):
        if c or _clean(w) in stopwords or not _clean(w):
            runs.append([])
        else:
            runs[-1].append(w)
    out = []
    for run in filter(None, runs):
        text = " ".join(run).strip(EDGE_PUNCT)
        if not text:
            continue
        near = _scored(text, [*fuzzy_candidates(store, text),
                              *store.search_names(text, FUZZY_K)])
        out.append(Link(mention=text,
                        closest=list(dict.fromkeys(e.name for _, _, e in near))[:CLOSEST]))
    return out


def read_as_linked(candidate: Candidate) -> Candidate:
    """``candidate`` with its question read as linked: each fuzzy mention replaced by the KG
    name it links to ("who directed Incepton" -> "who directed Inception"), so the planner
    and the language models see the name the KG holds (what the UI and CLI say they read)."""
    for lk in candidate.links:
        if lk.how == "fuzzy" and lk.name and lk.mention in candidate.question:
            candidate.question = candidate.question.replace(lk.mention, lk.name)
    return candidate


def not_in_kg(links: Sequence[Link]) -> list[str]:
    """The mentions an answer must abstain on: every unlinked topic; without topics, all
    the mentions when none linked. [] when the question can be answered."""
    topics = [lk for lk in links if lk.topic]
    if topics:
        return [lk.mention for lk in topics if not lk.linked]
    if links and not any(lk.linked for lk in links):
        return [lk.mention for lk in links]
    return []


def search(store: GraphReader, text: str, threshold: float, k: int = 10) -> list[Link]:
    """Entities for a typed name, best first (Explore's search): the exact name matches,
    then the fuzzy hits by similarity (``how`` "fuzzy" when at least ``threshold``)."""
    text = text.strip()
    if not text:
        return []
    exact = named_by(text, by_name_key(store.entities_by_name(lookup_names(text))))
    fuzzy = fuzzy_candidates(store, text, max(k, FUZZY_K))
    out: dict[str, Link] = {}
    for e in exact:
        out.setdefault(e.id, Link(mention=text, id=e.id, name=e.name, score=1.0, how="exact"))
    for score, _, e in _scored(text, fuzzy):
        if e.id not in out:
            out[e.id] = Link(mention=text, id=e.id, name=e.name, score=score,
                             how="fuzzy" if score >= threshold else None)
    return list(out.values())[:k]
