"""The small protocol every band index follows (SQLite today, Redis later).

An index stores, per namespace, one *entry* per admitted item (its title and body fingerprints,
URL, short title, first-seen time) and answers one question atomically: "is there an entry whose
title fingerprint is within ``title_k`` bits, or else whose body fingerprint is within ``body_k``
bits? If not, add this one." The tier order lives here, inside the index's transaction, so that
two processes carrying the same story can never both be admitted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Tier = Literal["title", "body", "sentence"]
#: The fingerprint (banded) tiers. ``"sentence"`` is the opt-in exact tier after them (see Query).
TIERS: tuple[Tier, ...] = ("title", "body")

#: Bumped whenever features or fingerprints change in a way that makes old fingerprints incomparable.
FEATURES_VERSION = "2"

#: At most this many number hashes make an entry's number signature (the smallest ones).
NUMBERS_MAX = 16
#: An item is checked with up to this many of its sentence hashes (the smallest) ...
SENTENCES_CHECKED = 64
#: ... and its entry keeps the smallest this many: a sample of its sentences chosen by hash.
SENTENCES_STORED = 16
#: The sentence tier also takes one shared sentence as enough when the bodies are this close.
SENTENCE_BODY_DISTANCE = 8
#: A sentence stored by this many entries is boilerplate (site chrome, a disclaimer, a byline):
#: the sentence tier ignores it, which also keeps the tier's lookups short in long crawls.
SENTENCE_MAX_HOLDERS = 32


def sentences_match(shared: int, stored: int, percent: int, body_distance: int | None) -> bool:
    """The opt-in sentence tier's rule for one earlier entry (the Redis script does the same).

    ``shared`` of the entry's ``stored`` sampled sentence hashes are in the item's text. More than
    ``percent`` % of them, and at least 2, make a match; so does a single one when the two body
    fingerprints are within :data:`SENTENCE_BODY_DISTANCE` bits (``body_distance``, None when
    either body has none): a short story keeps too few sentences for a share to mean much, and a
    sentence shared *and* a close body are two independent signs of one story.
    """
    if shared >= 2 and 100 * shared > percent * stored:
        return True
    return shared >= 1 and body_distance is not None and body_distance <= SENTENCE_BODY_DISTANCE


def numbers_agree(a: str | None, b: str | None, min_percent: int, empty_agrees: bool = False) -> bool:
    """Do two number signatures agree (the guard against templated reports with other figures)?

    A signature is ``""`` (no numbers) or up to :data:`NUMBERS_MAX` distinct 8-hex-digit hashes,
    sorted ascending and separated by single spaces (see ``fingerprint.number_signature``).
    ``min_percent`` ≤ 0 disables the check; ``None`` (an entry stored without a signature) always
    agrees. Both empty agree; one empty agrees only with ``empty_agrees`` (the sentence tier: its
    shared sentences already carry their figures; a repost that adds a box of linked headlines
    with years, or loses the one paragraph with figures, still agrees). Otherwise both are cut to the hashes ≤ the
    smaller of the two maxima of full (``NUMBERS_MAX``-long, so possibly truncated) signatures —
    the range both bottom-k samples cover — and they agree when ``100 × shared ≥ min_percent ×
    min(len)`` (overlap coefficient). Integers and string comparisons only, so a Lua script can
    do the same: equal-length lowercase hex strings sort as the numbers they spell.
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


class IndexError_(Exception):
    """Base of the errors an index raises (kept apart from the builtin ``IndexError``)."""


class IndexOpenError(IndexError_):
    """The index cannot be opened: not ours, corrupt, unreachable, read-only where writing is needed."""


class ParameterMismatch(IndexOpenError):
    """The index was built with parameters that make its fingerprints incomparable with ours."""


class IndexWriteError(IndexError_):
    """A check-and-add could not be committed (disk full, lock held past the busy timeout…)."""


@dataclass(frozen=True)
class IndexParams:
    """What makes fingerprints comparable. Recorded in the index when it is created and checked
    on every open: a mismatch is :class:`ParameterMismatch`, never a silent mix.

    ``title_bands``/``body_bands`` are the number of pigeonhole bands, so the index can answer
    exactly for any distance up to ``bands - 1`` (a larger threshold needs a new index).
    """

    bits: int = 64
    title_bands: int = 3
    body_bands: int = 4
    tokenizer: str = "jieba"
    features_version: str = FEATURES_VERSION

    @property
    def max_title_distance(self) -> int:
        return self.title_bands - 1

    @property
    def max_body_distance(self) -> int:
        return self.body_bands - 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def incompatibilities(self, requested: IndexParams) -> list[str]:
        """Why an index built with these parameters cannot answer queries made with ``requested``
        (empty: it can). Bits, tokenizer and feature version must be equal; bands may be more than
        requested, since k+1 bands answer every distance up to k exactly."""
        problems = [
            f"{name}: index {getattr(self, name)!r} vs requested {getattr(requested, name)!r}"
            for name in ("bits", "tokenizer", "features_version")
            if getattr(self, name) != getattr(requested, name)
        ]
        problems += [
            f"{name}: index {getattr(self, name)!r} vs requested {getattr(requested, name)!r} "
            f"(answers distances up to {getattr(self, name) - 1} only)"
            for name in ("title_bands", "body_bands")
            if getattr(self, name) < getattr(requested, name)
        ]
        return problems


@dataclass(frozen=True)
class Entry:
    """One admitted item as the index remembers it."""

    id: int
    namespace: str
    url: str | None
    title: str | None
    first_seen: float  # POSIX seconds
    title_fp: int | None
    body_fp: int | None
    numbers: str | None = None  # number signature (see numbers_agree); None: stored without one


@dataclass(frozen=True)
class Match:
    """The nearest earlier entry found by one tier."""

    tier: Tier
    distance: int
    entry: Entry


@dataclass(frozen=True)
class Query:
    """One check-and-add request. ``None`` fingerprints take no part (too little text).

    ``not_before``: entries first seen before this POSIX time are expired and never match.
    ``statuses``: what to record in the decision log when a tier matches (``"duplicate"`` or
    ``"flagged"``), so ``explain`` can later say what happened to an item.
    ``numbers``: the item's number signature (stored with the entry when it is added).
    ``title_numbers``: when > 0, a title-tier candidate counts only if
    ``numbers_agree(query.numbers, entry.numbers, title_numbers)``: the nearest *agreeing* entry
    within ``title_k`` is the match, and when none agrees the body tier decides. A recurring
    headline ("USDA COMMENTS ON EXPORT SALES REPORT") over a report with other figures is news.
    ``sentences``: the item's sentence signature (up to :data:`SENTENCES_CHECKED` distinct
    16-hex-digit hashes); the :data:`SENTENCES_STORED` smallest are stored with the entry when it
    is added (in a lookup table ``hash → entry ids``).
    ``sentences_shared``: a percentage; when > 0, an opt-in third tier after title and body: the
    earliest non-expired entry that :func:`sentences_match` (its stored sentence hashes among the
    query's, not counting hashes stored by :data:`SENTENCE_MAX_HOLDERS` entries or more; the body
    distance) and whose numbers agree (``title_numbers`` rule when > 0, a side
    without numbers agreeing) is a match with ``tier="sentence"`` and ``distance`` = number of its
    stored sentence hashes the query lacks.
    ``request_id``: the same id on a retry of the same item makes the retry idempotent where a
    batch can be applied in part (Redis: one script per query): an item that was added gets its
    entry back instead of finding itself as its own duplicate. Random when None.
    """

    title_fp: int | None
    body_fp: int | None
    title_k: int
    body_k: int
    url: str | None = None
    title: str | None = None
    seen_at: float = 0.0
    not_before: float | None = None
    statuses: Mapping[str, str] = field(default_factory=lambda: {"title": "duplicate", "body": "duplicate"})
    numbers: str | None = None
    title_numbers: int = 0
    sentences: tuple[str, ...] = ()
    sentences_shared: int = 0
    request_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """Result of :meth:`BandIndex.check_and_add`: ``match`` is None when the item was added."""

    match: Match | None
    entry_id: int | None  # id of the new entry when added


@dataclass(frozen=True)
class Decision:
    """A stored decision about a non-new item, for ``explain``."""

    url: str | None
    status: str  # "duplicate" | "flagged"
    tier: Tier
    distance: int
    original: Entry | None  # None when the original was since purged or forgotten
    decided_at: float
    title: str | None = None  # the decided item's (normalized, shortened) title


class QueryChecks:
    """Argument checks both backends make before touching their store (needs ``_bits``, ``params``
    and ``location`` on the index)."""

    _bits: int
    params: IndexParams
    location: str

    def _check_query(self, query: Query) -> None:
        if query.title_fp is None and query.body_fp is None:
            raise ValueError("a query needs a title or a body fingerprint (skip items without usable text)")
        self._check_fp(query.title_fp, "title_fp")
        self._check_fp(query.body_fp, "body_fp")
        self._check_k(query.title_k, query.body_k)

    def _check_fp(self, fp: int | None, what: str) -> None:
        if fp is not None and (not isinstance(fp, int) or isinstance(fp, bool) or fp < 0 or fp >> self._bits):
            raise ValueError(f"{what} must be an unsigned {self._bits}-bit integer, not {fp!r}")

    def _check_k(self, title_k: int, body_k: int) -> None:
        for tier, k, bands in (
            ("title", title_k, self.params.title_bands),
            ("body", body_k, self.params.body_bands),
        ):
            if not 0 <= k <= bands - 1:
                raise ValueError(
                    f"{tier} distance {k} is outside what index {self.location} answers exactly: "
                    f"0..{bands - 1} ({bands} {tier} bands); a larger threshold needs a new index"
                )


@runtime_checkable
class BandIndex(Protocol):
    """What the Deduplicator, the pipeline and the command line need from an index."""

    location: str  # human-readable: a file path or a redis URL without password
    namespace: str
    params: IndexParams

    def check_and_add(self, query: Query) -> Outcome:
        """Title tier, else body tier, else add: one atomic, durable step."""

    def check_and_add_many(self, queries: Sequence[Query]) -> list[Outcome]:
        """:meth:`check_and_add` for each query in order (a later query sees the earlier ones'
        entries); every outcome is durable when this returns. All queries are checked before any
        is run."""

    def lookup(
        self, title_fp: int | None, body_fp: int | None, *, title_k: int, body_k: int,
        not_before: float | None = None, limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances (no write), nearest first."""

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` without checking (warm-up, benchmarks)."""

    def explain(self, url: str) -> Decision | None:
        """The latest stored decision about ``url``, or None."""

    def decisions(self, limit: int = 1000) -> list[Decision]:
        """The most recent stored decisions of this namespace, newest first."""

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id or URL; returns how many entries went."""

    def purge(self, older_than: float) -> int:
        """Remove entries first seen before this POSIX time; returns how many."""

    def reset(self) -> int:
        """Remove every entry and decision of this namespace; returns how many entries went."""

    def count(self) -> int:
        """Entries in this namespace."""

    def stats(self) -> dict[str, Any]:
        """Location, size, parameters, entries per namespace, oldest/newest first-seen."""

    def entries(self) -> Iterator[Entry]:
        """Every entry of this namespace, oldest first (for ``export``)."""

    def close(self) -> None:
        """Release the connection; idempotent."""
