"""The tiered rule, stated once: what :meth:`check_and_add` answers, on every backend.

For one item (a :class:`~.base.Query`), earlier entries that have not expired (first seen at or
after ``not_before``) are searched tier by tier, and the first tier that finds one decides:

1. **Title tier.** The entry whose title fingerprint is nearest (Hamming distance ≤ ``title_k``;
   ties: earliest first seen, then lowest id) among those whose body does not contradict the
   item's (:func:`bodies_agree`): a question title over many answers, a recurring wire headline
   over other texts, is a title match over different stories. With the number guard on
   (``title_numbers`` > 0 and the item has a number signature), only entries whose body numbers
   agree with the item's (:func:`numbers_agree`) count: a recurring headline over a report with
   other figures is news, and the body tier decides it. A title of fewer than
   :data:`TITLE_ALONE_FEATURES` features (``title_features``) does not decide alone: its match
   needs bodies that agree, never a side without a body (``bodies_agree(..., alone=False)``).
2. **Body tier.** The entry whose body fingerprint is nearest (≤ ``body_k``), same ties. When the
   item's body is figure-heavy (``figures``: templated earnings reports sit within a few bits of
   each other) and the number guard is on, only entries whose numbers agree count. A short body
   (the query has ``chars``, :mod:`scrapy_simhash.text.similarity`) is where a fingerprint stops
   being reliable: an entry that kept a character key counts only when the two keys are the same
   text (:func:`~scrapy_simhash.text.similarity.same_text`), and then up to ``chars_k`` bits away
   (a near-miss among the fingerprint's candidates: a shifted excerpt, an added attribution) when
   their numbers agree and their titles, where both have one, are close (:data:`CHARS_NUMBERS`,
   :data:`CHARS_TITLE_PART`); the match carries its score. An entry without a key (a long body)
   counts within ``body_k``.
3. **Sentence tier** (``sentences_shared`` > 0 and the item has a sentence signature). The earliest
   entry whose stored sentence sample :func:`sentences_match` the item's sentences (a sentence that
   :data:`SENTENCE_MAX_HOLDERS` entries hold is boilerplate and counts no more) and, unless they
   share :data:`SENTENCES_FIGURES` sentences that are not lines, whose numbers agree (a side
   without numbers agreeing). Its distance is the number of its sampled sentences the item lacks.
4. **Otherwise the item is new**: its entry is inserted (with the :data:`SENTENCES_STORED` smallest
   sentence hashes of its signature). A matched item with a URL gets its decision recorded
   (``"flagged"`` for the tiers in ``flagged``, else ``"duplicate"``) so ``explain`` can tell why.

A backend supplies a :class:`Store`, the few operations in which backends really differ, and runs
:func:`check_and_add` inside its own atomic step (SQLite: one ``BEGIN IMMEDIATE`` transaction;
Redis: an optimistic ``WATCH``/``MULTI``/``EXEC`` transaction, decided again when what it read
changed). ``tests/test_rule.py`` checks both backends against this module on one verdict table.
:func:`peek` is the same rule without the insert and the record: the dry run that ``check``, the
report and the tests use.

The tuned constants below say what they decide; the measurements behind their values are in
``docs/decisions/``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from ..fingerprint.signatures import NUMBERS_MAX, is_line
from ..text.similarity import same_text
from .base import Entry, Match, Outcome, Query, Tier

#: An entry keeps the smallest this many of its sentence hashes: a sample of its sentences by hash,
#: which a cut, padded or reordered copy agrees on. Fewer miss edited reposts, more cost bytes on
#: every entry (docs/decisions/0001-sentence-sample.md).
SENTENCES_STORED = 12
#: The sentence tier also takes one shared sentence as enough when the bodies are this close…
SENTENCE_BODY_DISTANCE = 8
#: … and the shared sentences are at least 1/this of the entry's sample: one sentence of a full sample
#: shared is a sign of another text (two reports of one event quoting the same statement sit a few
#: bits apart, their topic words agree), not of a repost, which keeps most of the sample
#: (docs/decisions/0002-single-sentence-rule.md).
SENTENCE_BODY_PART = 4
#: The sentence tier checks numbers only when fewer sentences than this are shared (sentences, not
#: lines: a table's header rows are template): a templated report with other figures (rate
#: tables, a later version of a story) shares a sentence or two of its template; three shared
#: sentences carry the story's figures with them, and an edited repost adds and loses figures with
#: the sentences it adds and loses (docs/decisions/0003-sentence-figures.md).
SENTENCES_FIGURES = 3
#: Title tier: two body fingerprints further apart than this contradict a title match unless the
#: bodies share a sampled sentence. Unrelated texts sit about 32 bits apart, reposts of one title
#: rarely this far, and most of those share a sampled sentence
#: (docs/decisions/0005-title-body-distance.md).
TITLE_BODY_DISTANCE = 20
#: A sentence stored by this many entries is boilerplate (site chrome, a disclaimer, a byline):
#: the sentence tier ignores it, which also keeps the tier's lookups short in long crawls
#: (docs/decisions/0006-sentence-boilerplate.md).
SENTENCE_MAX_HOLDERS = 32
#: A title fingerprint of fewer features than this is a vote of two or three words: two different
#: short titles ("东营女上門" / "侯马女上門", spam over empty bodies; question titles) meet too often
#: for such a title to join items whose bodies say nothing (docs/decisions/0522-title-alone.md).
TITLE_ALONE_FEATURES = 4
#: The first page of holders the title and figure checks read (each next page twice the last): a
#: fingerprint many entries hold costs one page when its first holders fit
#: (docs/decisions/0007-holders-page.md).
HOLDERS_PAGE = 8
#: A short body's character check looks at the body tier's candidates up to bits / this apart:
#: unrelated texts sit about bits / 2 apart, and the shifted or edited short copies that move past
#: the body threshold mostly sit within bits / 4 (docs/decisions/0530-short-text-check.md).
CHARS_DISTANCE_PART = 4


#: A short body found by characters beyond the body threshold needs its numbers to agree (percent,
#: :func:`numbers_agree`)…
CHARS_NUMBERS = 70
#: … and, where both have titles, the titles within 1/this of the character check's distance (8 of
#: 64 bits): two notices of one template for other companies are alike in all but a name and a
#: figure (docs/decisions/0530-short-text-check.md).
CHARS_TITLE_PART = 2


def chars_distance(bits: int) -> int:
    """How far apart (bits) a short body's character check looks among the body tier's candidates."""
    return bits // CHARS_DISTANCE_PART


class Store(Protocol):
    """What the rule needs from a backend, inside one atomic step. Fingerprints are unsigned ints."""

    def candidates(self, tier: Tier, fp: int) -> Iterable[int]:
        """Stored fingerprints of ``tier`` that share at least one band with ``fp`` (may repeat)."""

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        """Entries holding exactly ``fp`` as their ``tier`` fingerprint, first seen at or after
        ``not_before``, earliest first (then lowest id): ``limit`` of them (all when None) after
        the first ``offset``."""

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        """``(entry, shared, stored)`` for every entry first seen at or after ``not_before`` that
        holds some of ``hashes`` (sorted, distinct), earliest first (then lowest id): how many of
        them it holds and how many sentence hashes it stores. Hashes held by
        :data:`SENTENCE_MAX_HOLDERS` entries or more, expired ones included, are left out."""

    def insert(self, query: Query, seen_at: float) -> int:
        """Add the query's entry (first seen ``seen_at``); returns its id."""

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:
        """Remember the decision about ``query.url`` (not None): status, tier, distance, original."""


def numbers_agree(a: str | None, b: str | None, min_percent: int, empty_agrees: bool = False) -> bool:
    """Do two number signatures agree (the guard against templated reports with other figures)?

    A signature is ``""`` (no numbers) or up to :data:`~scrapy_simhash.fingerprint.signatures.NUMBERS_MAX`
    distinct 8-hex-digit hashes, sorted ascending and separated by single spaces.
    ``min_percent`` ≤ 0 disables the check; ``None`` (an entry stored without a signature) always
    agrees. Both empty agree; one empty agrees only with ``empty_agrees`` (the sentence tier: its
    shared sentences already carry their figures; a repost that adds a box of linked headlines
    with years, or loses the one paragraph with figures, still agrees). Otherwise both are cut to
    the hashes ≤ the smaller of the two maxima of full (``NUMBERS_MAX``-long, so possibly
    truncated) signatures — the range both bottom-k samples cover — and they agree when
    ``100 × shared ≥ min_percent × min(len)`` (overlap coefficient). Integers and string
    comparisons only: equal-length hex strings sort as the numbers they write.
    """
    if min_percent <= 0 or a is None or b is None:
        return True
    xs, ys = a.split(), b.split()
    if not xs or not ys:
        return empty_agrees or (not xs and not ys)
    top = "g"  # above every hex string
    if len(xs) >= NUMBERS_MAX:
        top = min(top, xs[-1])
    if len(ys) >= NUMBERS_MAX:
        top = min(top, ys[-1])
    xs = [x for x in xs if x <= top]
    ys = [y for y in ys if y <= top]
    if not xs or not ys:
        return not xs and not ys
    shared = len(set(xs) & set(ys))
    return 100 * shared >= min_percent * min(len(xs), len(ys))


def bodies_agree(query: Query, entry: Entry, alone: bool = True) -> bool:
    """Do the two bodies leave a title match standing?

    Both fingerprinted: yes when within :data:`TITLE_BODY_DISTANCE` bits, or when the entry's
    stored sentence sample shares a sentence with the item's (a truncated copy, a repost inside a
    portal page). Both too short to fingerprint: yes when their digests are equal. One
    fingerprinted, the other short: no (two answers under one question). A side without any body
    (a title-only item, a body of a few characters): ``alone``, whether the title decides alone.
    """
    if query.body_fp is not None and entry.body_fp is not None:
        if (query.body_fp ^ entry.body_fp).bit_count() <= TITLE_BODY_DISTANCE:
            return True
        return not set(entry.sentences).isdisjoint(query.sentences)
    if (query.body_fp is None and query.short_body is None) or (entry.body_fp is None and entry.short_body is None):
        return alone
    return query.short_body is not None and query.short_body == entry.short_body


def sentences_match(shared: int, stored: int, percent: int, body_distance: int | None, item: int | None = None) -> bool:
    """The sentence tier's test for one earlier entry.

    ``shared`` of the entry's ``stored`` sampled sentence hashes are in the item's text. At least 2
    shared make a match when they are more than ``percent`` % of the entry's sample (the story is
    in the item), or more than ``percent`` % of the item's ``item`` sentences: ``item`` is given
    (not None) only when every one of the item's hashes lies within the range the entry's sample
    covers (the sample is a bottom-k by hash, so in that range it lists every sentence the entry
    has), so the share is exact: the item is a part of the entry (a cut copy of a page whose
    sample holds its site chrome and related links). Fewer shared sentences are enough when the
    two body fingerprints are within :data:`SENTENCE_BODY_DISTANCE` bits (``body_distance``, None
    when either body has none) and they are at least 1/:data:`SENTENCE_BODY_PART` of the sample: a
    short story keeps too few sentences for a share to mean much, and a part of it shared *and* a
    close body are two independent signs of one story.
    """
    if shared >= 2 and (100 * shared > percent * stored or (item is not None and 100 * shared > percent * item)):
        return True
    return (
        shared >= 1 and SENTENCE_BODY_PART * shared >= stored
        and body_distance is not None and body_distance <= SENTENCE_BODY_DISTANCE
    )


def nearest(
    store: Store, tier: Tier, fp: int, k: int, not_before: float, limit: int = 1,
    accept: Callable[[Entry], bool] | None = None,
) -> list[Match]:
    """The ``limit`` nearest entries within ``k`` (distance, then earliest first seen, then lowest
    id); with ``accept``, only entries it accepts count: the holders of a candidate fingerprint (a
    recurring headline: one fingerprint, many entries) are read in growing pages until enough are
    accepted, so a boilerplate fingerprint held by 100k entries costs one page when its first fits."""
    distances: dict[int, int] = {}
    for other in store.candidates(tier, fp):
        if other not in distances:  # a fingerprint agreeing on several bands comes back once per band
            distances[other] = (other ^ fp).bit_count()
    candidates = sorted((d, other) for other, d in distances.items() if d <= k)
    matches: list[Match] = []
    i = 0
    while i < len(candidates) and len(matches) < limit:
        distance, group = candidates[i][0], []
        while i < len(candidates) and candidates[i][0] == distance:
            need = limit - len(matches)
            if accept is None:
                group += store.holders(tier, candidates[i][1], not_before, need)
            else:
                group += accepted(store, tier, candidates[i][1], not_before, need, accept)
            i += 1
        group.sort(key=lambda e: (e.first_seen, e.id))
        matches += [Match(tier, distance, e) for e in group[: limit - len(matches)]]
    return matches


def accepted(
    store: Store, tier: Tier, fp: int, not_before: float, need: int, accept: Callable[[Entry], bool],
) -> list[Entry]:
    """The earliest ``need`` holders of ``fp`` that ``accept`` takes, read in pages of 8, 16, 32…"""
    found: list[Entry] = []
    offset, size = 0, HOLDERS_PAGE
    while len(found) < need:
        page = store.holders(tier, fp, not_before, size, offset)
        found += [e for e in page if accept(e)]
        if len(page) < size:
            break
        offset, size = offset + size, size * 2
    return found[:need]


def sentence_tier(store: Store, query: Query, not_before: float) -> Match | None:
    """The earliest entry the sentence tier matches (see the module docstring), or None."""
    mine = sorted(set(query.sentences))
    for entry, shared, stored in store.sentence_holders(mine, not_before):
        distance = None
        if query.body_fp is not None and entry.body_fp is not None:
            distance = (query.body_fp ^ entry.body_fp).bit_count()
        # the entry's sample is all its sentences, or covers the range of all of the item's
        whole = stored < SENTENCES_STORED or mine[-1] <= max(entry.sentences)
        # shared sentences that are not lines (boilerplate ones left out of `shared` may undercount)
        sentences = shared - sum(map(is_line, set(entry.sentences).intersection(mine)))
        if sentences_match(shared, stored, query.sentences_shared, distance, len(mine) if whole else None) and (
            sentences >= SENTENCES_FIGURES
            or numbers_agree(query.numbers, entry.numbers, query.title_numbers, empty_agrees=True)
        ):
            return Match("sentence", stored - shared, entry)
    return None


def body_tier(store: Store, query: Query, not_before: float, accept: Callable[[Entry], bool] | None) -> Match | None:
    """The body tier's match (see the module docstring), or None; ``accept``: the number guard."""
    assert query.body_fp is not None
    mine, fp, k = query.chars, query.body_fp, query.body_k
    if mine is None:
        found = nearest(store, "body", fp, k, not_before, accept=accept)
        return found[0] if found else None
    scores: dict[int, float] = {}

    def checked(e: Entry) -> bool:
        if accept is not None and not accept(e):
            return False
        if e.body_fp is None:
            return False
        within = (e.body_fp ^ fp).bit_count() <= k
        if e.chars is None:  # a long body: its fingerprint, within the threshold
            return within
        same, scores[e.id] = same_text(mine, e.chars)
        if not same or within:
            return same
        # found beyond the threshold: a template filled in for another subject (a dividend notice,
        # a price line) has other figures or another title
        if not numbers_agree(query.numbers, e.numbers, CHARS_NUMBERS):
            return False
        return query.title_fp is None or e.title_fp is None or (
            (query.title_fp ^ e.title_fp).bit_count() <= query.chars_k // CHARS_TITLE_PART)

    found = nearest(store, "body", fp, max(k, query.chars_k), not_before, accept=checked)
    if not found:
        return None
    match = found[0]
    return Match(match.tier, match.distance, match.entry, scores.get(match.entry.id))


def peek(store: Store, query: Query) -> Match | None:
    """The match that decides ``query`` (title tier, else body, else sentence), or None: new."""
    not_before = -math.inf if query.not_before is None else query.not_before
    guarded = query.title_numbers > 0 and query.numbers is not None
    if query.title_fp is not None:
        alone = query.title_features is None or query.title_features >= TITLE_ALONE_FEATURES

        def title_accept(e: Entry) -> bool:
            if not bodies_agree(query, e, alone):
                return False
            return not guarded or numbers_agree(query.numbers, e.numbers, query.title_numbers)

        found = nearest(store, "title", query.title_fp, query.title_k, not_before, accept=title_accept)
        if found:
            return found[0]
    if query.body_fp is not None:
        accept = None
        if guarded and query.figures:
            accept = lambda e: numbers_agree(query.numbers, e.numbers, query.title_numbers)  # noqa: E731
        match = body_tier(store, query, not_before, accept)
        if match is not None:
            return match
    if query.sentences_shared > 0 and query.sentences:
        return sentence_tier(store, query, not_before)
    return None


def check_and_add(store: Store, query: Query, flagged: Collection[Tier] = ()) -> Outcome:
    """:func:`peek`, then record the decision (a match with a URL) or insert the entry (new)."""
    seen_at = query.seen_at or time.time()
    match = peek(store, query)
    if match is None:
        return Outcome(match=None, entry_id=store.insert(query, seen_at))
    if query.url is not None:
        store.record(query, match, "flagged" if match.tier in flagged else "duplicate", seen_at)
    return Outcome(match=match, entry_id=None)


def lookup(
    store: Store, title_fp: int | None, body_fp: int | None, *, title_k: int, body_k: int,
    not_before: float | None, limit: int,
) -> list[Match]:
    """Nearest entries per fingerprint tier (no guard, no write): title tier first, each nearest first."""
    nb = -math.inf if not_before is None else not_before
    matches: list[Match] = []
    if title_fp is not None:
        matches += nearest(store, "title", title_fp, title_k, nb, limit)
    if body_fp is not None:
        matches += nearest(store, "body", body_fp, body_k, nb, limit)
    return matches
