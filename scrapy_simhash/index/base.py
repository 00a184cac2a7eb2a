"""The small protocol every band index follows (SQLite, Redis), and the values it speaks in.

An index stores, per namespace, one *entry* per admitted item (its title and body fingerprints,
URL, short title, first-seen time, signatures) and answers one question atomically: "does an
earlier entry decide this item as a duplicate? If not, add it." The rule that answers it lives in
:mod:`.rule`, and every backend runs it inside its own atomic step, so that two processes carrying
the same story can never both be admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .runs import Run

Tier = Literal["title", "body", "sentence"]
#: The fingerprint (banded) tiers. ``"sentence"`` is the tier on exact sentences after them (see Query).
TIERS: tuple[Tier, ...] = ("title", "body")

#: The version of what a fingerprint and its signatures are computed from, recorded in every index
#: and checked at open: an index of another version is refused, its fingerprints being incomparable.
#: Bumped by any change that moves a fingerprint or a signature of the same input: normalization,
#: main-text extraction, segmentation, features and their weights, the hashes, the signatures' formats.
FEATURES_VERSION = "6"

class SimhashIndexError(Exception):
    """Base of the errors an index raises (named apart from the builtin ``IndexError``)."""


class IndexOpenError(SimhashIndexError):
    """The index cannot be opened: not ours, corrupt, unreachable, read-only where writing is needed."""


class ParameterMismatch(IndexOpenError):
    """The index was built with parameters that make its fingerprints incomparable with ours."""


class IndexWriteError(SimhashIndexError):
    """A check-and-add could not be committed (disk full, lock held past the busy timeout…)."""


@dataclass(frozen=True)
class IndexParams:
    """What makes fingerprints comparable. Recorded in the index when it is created and checked
    on every open: a mismatch is :class:`ParameterMismatch`, never a silent mix.

    ``title_bands``/``body_bands`` fix the largest distance each tier answers exactly:
    ``bands - 1`` (a larger threshold needs the index re-banded, ``scrapy-simhash reband``).
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
    sentences: tuple[str, ...] = ()  # its stored sample of sentence hashes (rule.SENTENCES_STORED smallest)
    short_body: str | None = None  # digest of a body too short to fingerprint (signatures.short_body_digest)
    chars: str | None = None  # a short body's character key (text.similarity.char_key); None: not short


@dataclass(frozen=True)
class Match:
    """The nearest earlier entry found by one tier; ``score``: the character similarity of the two
    short bodies when the body tier checked it (:mod:`scrapy_simhash.text.similarity`), else None."""

    tier: Tier
    distance: int
    entry: Entry
    score: float | None = None


@dataclass(frozen=True)
class Query:
    """One check-and-add request: the item and the rule's parameters (see :mod:`.rule`).

    ``None`` fingerprints take no part (too little text). ``not_before``: entries first seen
    before this POSIX time are expired and never match. ``numbers``: the item's number signature
    (stored with its entry). ``title_numbers``: when > 0, the title tier's number guard (a
    percentage, see :func:`.rule.numbers_agree`). ``sentences``: the item's sentence signature (up
    to :data:`~scrapy_simhash.fingerprint.signatures.SENTENCES_CHECKED` distinct 16-hex-digit hashes; the
    :data:`~.rule.SENTENCES_STORED` smallest are stored with its entry). ``sentences_shared``: a
    percentage; when > 0, the sentence tier is on (the sentences also serve the title tier's body
    check, :func:`.rule.bodies_agree`). ``short_body``: the digest of a body too short to
    fingerprint (stored with the entry; the title tier's body check). ``figures``: the body is
    figure-heavy, so the body tier takes only entries whose numbers agree (``title_numbers``
    percent, when > 0). ``chars``: the character key of a short body (stored with the entry); with
    it, the body tier confirms a match by character similarity, and takes an entry whose key is
    similar enough among the candidates up to ``chars_k`` bits away (:func:`.rule.body_tier`).
    ``request_id``: the same id on a retry of the
    same item makes the retry idempotent where a batch can be applied in part (Redis: one script
    per query): an item that was added gets its entry back instead of finding itself as its own
    duplicate. On SQLite, a request sent again after its batch was committed (a worker process that
    died before answering) gets the answer it was given, whatever it was. Random when None.
    ``owner``: when set (:func:`.owners.new_owner`), the entry an
    added item gets is *pending* until :meth:`BandIndex.deliver` (its item reached storage) or
    :meth:`BandIndex.release` (it was dropped downstream); a pending entry matches like any other.
    ``title_features``: how many features the title fingerprint votes; fewer than
    :data:`~.rule.TITLE_ALONE_FEATURES` and the title does not decide alone (None: unknown, it does).
    """

    title_fp: int | None
    body_fp: int | None
    title_k: int
    body_k: int
    url: str | None = None
    title: str | None = None
    seen_at: float = 0.0
    not_before: float | None = None
    numbers: str | None = None
    title_numbers: int = 0
    sentences: tuple[str, ...] = ()
    sentences_shared: int = 0
    short_body: str | None = None
    figures: bool = False
    request_id: str | None = None
    owner: str | None = None
    title_features: int | None = None
    chars: str | None = None
    chars_k: int = 0


@dataclass(frozen=True)
class Outcome:
    """Result of :meth:`BandIndex.check_and_add`: ``match`` is None when the item was added.

    ``error``: this item alone could not be decided (a value in the index that is not ours, a
    script error): nothing of it was written, and the other items of its batch are decided as usual.
    Errors that concern the whole batch (connection lost, commit failed) are raised instead."""

    match: Match | None
    entry_id: int | None  # id of the new entry when added
    error: str | None = None

    def checked(self) -> Outcome:
        """This outcome, or its error raised as :class:`IndexWriteError` (a single check-and-add)."""
        if self.error is not None:
            raise IndexWriteError(self.error)
        return self


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
    score: float | None = None  # the character similarity that confirmed a short body's match


@runtime_checkable
class BandIndex(Protocol):
    """What the Deduplicator, the pipeline and the command line need from an index."""

    location: str  # human-readable: a file path or a redis URL without password
    namespace: str
    params: IndexParams

    def check_and_add(self, query: Query, *, flagged: Collection[Tier] = ()) -> Outcome:
        """The rule (:mod:`.rule`): the deciding match, else add — one atomic, durable step. A match
        with a URL is recorded as ``"flagged"`` for the tiers in ``flagged``, else ``"duplicate"``.
        An item the index cannot decide raises :class:`IndexWriteError`."""

    def check_and_add_many(self, queries: Sequence[Query], *, flagged: Collection[Tier] = ()) -> list[Outcome]:
        """:meth:`check_and_add` for each query in order (a later query sees the earlier ones'
        entries); every outcome is durable when this returns. All queries are checked before any
        is run. An item the index cannot decide gets an outcome with ``error`` (nothing of it
        written) while the others stand; a failure of the whole batch raises."""

    def peek(self, query: Query) -> Match | None:
        """What :meth:`check_and_add` would answer now (the deciding match, None: new), without
        adding or recording anything; works on an index opened read-only."""

    def deliver(self, entry_ids: Sequence[int]) -> None:
        """These pending entries' items reached storage: they are references for good (durable)."""

    def release(self, entry_ids: Sequence[int]) -> int:
        """These pending entries' items were dropped or failed downstream: remove them, so that the
        next copy of the story is admitted; returns how many went."""

    def recover(self, delivered: Callable[[str], Collection[int]] | None = None) -> int:
        """Release the pending entries of owners that died before delivering them (never those of
        a live process sharing the index); returns how many went. ``delivered(owner)``: the ids a
        dead owner of this host recorded as stored elsewhere (its delivery journal): delivered, not
        released."""

    def lookup(
        self, title_fp: int | None, body_fp: int | None, *, title_k: int, body_k: int,
        not_before: float | None = None, limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances (no write), nearest first."""

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` without checking (warm-up, benchmarks)."""

    def explain(self, url: str) -> Decision | None:
        """The latest stored decision about ``url``, or None (a damaged one: :class:`SimhashIndexError`)."""

    def decisions(self, limit: int = 1000, *, damaged: Callable[[str], None] | None = None) -> list[Decision]:
        """The most recent stored decisions of this namespace, newest first. One holding a value the
        index never writes (:mod:`.damage`) is described to ``damaged`` and left out; without
        ``damaged``, it raises :class:`SimhashIndexError`."""

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

    def entries(self, latest: int | None = None, *, damaged: Callable[[str], None] | None = None
                ) -> Iterator[Entry]:
        """Every entry of this namespace, oldest first (for ``export``); with ``latest``, only the
        ``latest`` most recent ones, still oldest first (the report's window: not the whole index).
        An entry holding a value the index never writes (:mod:`.damage`) is described to ``damaged``
        and skipped; without ``damaged``, it raises :class:`SimhashIndexError`."""

    def record_run(self, run: Run) -> None:
        """Write the record of a crawl of this namespace (:mod:`.runs`), replacing the one with its id
        (its start, written when it opened); beyond :data:`.runs.RUNS_KEPT` records, the oldest go."""

    def runs(self, limit: int = 50, *, damaged: Callable[[str], None] | None = None) -> list[Run]:
        """The ``limit`` most recent runs of this namespace, newest first (works read-only). A record
        the index never writes is described to ``damaged`` and left out; without it, it raises
        :class:`SimhashIndexError`."""

    def close(self) -> None:
        """Release the connection; idempotent."""

    def __enter__(self) -> BandIndex: ...

    def __exit__(self, *exc: object) -> None: ...
