"""The Deduplicator: an item's fingerprints, the settings' thresholds and the index's one rule.

The tiered rule itself (title tier with its body and number checks, then body, then the sentence tier,
else new) is stated once, in :mod:`scrapy_simhash.index.rule`, and every index runs it; this
module turns settings (thresholds, expiry, the dynamic body threshold, drop or flag per tier) into
the index's queries and its answers into :class:`Verdict` objects. Entries carry their sentence
sample whatever ``sentences_shared`` (the title tier's body check reads it too).

The :class:`Deduplicator` knows nothing of Scrapy: the pipeline, the command line and the
benchmarks all use it. Fingerprinting (CPU-heavy) and the check-and-add (one short index
transaction) are separate calls, so a caller can run the first on many workers and keep the
second serialized.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import defaults
from .fingerprint.fingerprinter import Fingerprinter, Fingerprints
from .index import (
    FEATURES_VERSION,
    BandIndex,
    Entry,
    IndexParams,
    Outcome,
    ParameterMismatch,
    Query,
    Tier,
    open_index,
    reset_layout,
)
from .index.meta import other_features
from .index.rule import chars_distance
from .settings import check_keywords

Status = Literal["new", "duplicate", "flagged", "skipped", "error"]
Action = Literal["drop", "flag"]

# The settings' defaults (scrapy_simhash.defaults), under the names of the keywords they are defaults of.
DEFAULT_TITLE_MAX_DISTANCE = defaults.TITLE_MAX_DISTANCE
DEFAULT_BODY_MAX_DISTANCE = defaults.BODY_MAX_DISTANCE
#: Title tier: minimum overlap (percent) of the bodies' number sets; 0 = no number check.
DEFAULT_TITLE_NUMBERS = defaults.TITLE_NUMBERS
#: Sentence tier: percent of an earlier story's sampled sentences that must be here; 0 = off.
DEFAULT_SENTENCES_SHARED = defaults.SENTENCES_SHARED
#: Fingerprinter options of :meth:`Deduplicator.open` that are settings, checked as the settings are.
CHECKED_FINGERPRINTER_OPTIONS = ("top_k", "max_share", "stop_words", "user_dict", "title_patterns", "main_content",
                                 "profile")
#: What to do when a threshold outgrows an index: its band layout is fixed when it is created.
WIDER_THRESHOLD = (
    "A larger distance (SIMHASH_TITLE_MAX_DISTANCE / SIMHASH_BODY_MAX_DISTANCE, or SIMHASH_DYNAMIC_THRESHOLD, "
    "which needs 2 more body bands) needs other band rows: re-band the index in place (`scrapy-simhash reband "
    "PATH_OR_URL`, or SIMHASH_RESET / --reset, which empties the namespace and re-bands the index)"
)
#: Opt-in dynamic body threshold: short bodies vary more per edit, long ones less
#: (docs/decisions/0015-dynamic-threshold.md).
SHORT_BODY_CHARS, SHORT_BODY_BONUS = 100, 2
LONG_BODY_CHARS, LONG_BODY_MALUS = 2000, 1


@dataclass(frozen=True)
class Verdict:
    """What the rule decided about one item, and why."""

    status: Status
    tier: Tier | None = None
    distance: int | None = None
    original: Entry | None = None  # the earlier item it matched
    entry_id: int | None = None  # id of the new entry when status is "new"
    title_fp: int | None = None
    body_fp: int | None = None
    reason: str | None = None  # why it was skipped, or the error (status "error": the index failed it)
    score: float | None = None  # the character similarity that confirmed a short body's match

    @property
    def check(self) -> str | None:
        """Which check decided a match: ``"characters"`` (a short body's similarity confirmed it),
        ``"fingerprint"``, or None (not a match)."""
        if self.tier is None:
            return None
        return "fingerprint" if self.score is None else "characters"

    @property
    def is_new(self) -> bool:
        return self.status == "new"

    def summary(self) -> str:
        """One short line: tier, distance, original URL (used in drop messages and logs)."""
        if self.status in ("duplicate", "flagged") and self.original is not None:
            original = self.original.url or f"entry #{self.original.id}"
            chars = "" if self.score is None else f", characters {self.score:.2f}"
            return f"{self.tier} tier, distance {self.distance}{chars}, original {original}"
        if self.status in ("skipped", "error"):
            return f"{self.status}: {self.reason}"
        return self.status

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (fingerprints as hex strings)."""
        original = None
        if self.original is not None:
            original = {
                "id": self.original.id,
                "url": self.original.url,
                "title": self.original.title,
                "first_seen": self.original.first_seen,
            }
        return {
            "status": self.status,
            "tier": self.tier,
            "distance": self.distance,
            "original": original,
            "title_fp": None if self.title_fp is None else f"{self.title_fp:x}",
            "body_fp": None if self.body_fp is None else f"{self.body_fp:x}",
            "reason": self.reason,
            "check": self.check,
            "score": None if self.score is None else round(self.score, 3),
        }


class Deduplicator:
    """Fingerprints items and checks-and-adds them against a band index, tier by tier."""

    def __init__(
        self,
        index: BandIndex,
        fingerprinter: Fingerprinter,
        *,
        title_max_distance: int = DEFAULT_TITLE_MAX_DISTANCE,
        body_max_distance: int = DEFAULT_BODY_MAX_DISTANCE,
        title_action: Action = defaults.TITLE_ACTION,
        body_action: Action = defaults.BODY_ACTION,
        ttl_days: float | None = defaults.TTL_DAYS,
        dynamic_threshold: bool = defaults.DYNAMIC_THRESHOLD,
        title_numbers: int = DEFAULT_TITLE_NUMBERS,
        sentences_shared: int = DEFAULT_SENTENCES_SHARED,
        owner: str | None = None,
    ) -> None:
        # The rule of what is valid is the settings table's (SettingError is a ValueError).
        check_keywords({"title_max_distance": title_max_distance, "body_max_distance": body_max_distance,
                        "title_action": title_action, "body_action": body_action, "ttl_days": ttl_days,
                        "title_numbers": title_numbers, "sentences_shared": sentences_shared},
                       bits=fingerprinter.bits)
        if sentences_shared and not getattr(fingerprinter, "sentences", True):
            raise ValueError("sentences_shared needs a Fingerprinter made with sentences=True")
        needed = required_params(fingerprinter.bits, title_max_distance, body_max_distance, dynamic_threshold)
        params = index.params
        if params.bits != fingerprinter.bits:
            raise ValueError(f"index {index.location} holds {params.bits}-bit fingerprints, not {fingerprinter.bits}")
        features = getattr(fingerprinter, "features_version", FEATURES_VERSION)
        if params.features_version != features:
            raise ParameterMismatch(
                f"index {index.location} holds fingerprints of features version {params.features_version!r}, "
                f"this fingerprinter makes {features!r}: {other_features(params.features_version, features, '')}"
            )
        if params.title_bands < needed.title_bands or params.body_bands < needed.body_bands:
            raise ValueError(
                f"index {index.location} answers title distances up to {params.max_title_distance} and body "
                f"distances up to {params.max_body_distance}; these settings need {needed.max_title_distance} "
                f"and {needed.max_body_distance}: {WIDER_THRESHOLD}"
            )
        self.index = index
        self.fingerprinter = fingerprinter
        self.title_max_distance = title_max_distance
        self.body_max_distance = body_max_distance
        self.actions: dict[str, str] = {"title": title_action, "body": body_action}
        # The sentence tier takes the body tier's action.
        actions: tuple[tuple[Tier, str], ...] = (
            ("title", title_action), ("body", body_action), ("sentence", body_action))
        self._flagged = frozenset(
            tier for tier, action in actions
            if action == "flag"
        )
        self.ttl_days = ttl_days
        self.dynamic_threshold = dynamic_threshold
        self.title_numbers = title_numbers
        self.sentences_shared = sentences_shared
        #: Set (:func:`~scrapy_simhash.index.owners.new_owner`): new items' entries are pending until
        #: ``index.deliver`` (their item reached storage) or ``index.release`` (it was dropped later).
        self.owner = owner

    @classmethod
    def open(
        cls,
        index_url: str,
        *,
        namespace: str = defaults.NAMESPACE,
        bits: int = defaults.BITS,
        title_max_distance: int = DEFAULT_TITLE_MAX_DISTANCE,
        body_max_distance: int = DEFAULT_BODY_MAX_DISTANCE,
        dynamic_threshold: bool = defaults.DYNAMIC_THRESHOLD,
        reset: bool = defaults.RESET,
        fingerprinter: Fingerprinter | None = None,
        index_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> Deduplicator:
        """Open (or create) the index at ``index_url`` and build a Deduplicator on it.

        ``options`` go to the Deduplicator (``title_action``, ``body_action``, ``ttl_days``,
        ``title_numbers``, ``sentences_shared``) or,
        when no ``fingerprinter`` is given, to the :class:`Fingerprinter` (``top_k``, ``stop_words``,
        ``user_dict``, ``title_patterns``, ``max_share``, ``min_title_chars``, ``min_body_chars``, ``main_content``).
        """
        mine = ("title_action", "body_action", "ttl_days", "title_numbers", "sentences_shared", "owner")
        own = {k: options.pop(k) for k in mine if k in options}
        # Checked as their settings are, before anything is opened.
        check_keywords({"namespace": namespace, "bits": bits, "title_max_distance": title_max_distance,
                        "body_max_distance": body_max_distance, **{k: v for k, v in own.items() if k != "owner"},
                        **{k: v for k, v in options.items() if k in CHECKED_FINGERPRINTER_OPTIONS}})
        if fingerprinter is None:
            fingerprinter = Fingerprinter(bits=bits, **options)
        elif options:
            raise TypeError(f"unexpected options with an explicit fingerprinter: {sorted(options)}")
        params = required_params(
            fingerprinter.bits, title_max_distance, body_max_distance, dynamic_threshold,
            getattr(fingerprinter, "features_version", FEATURES_VERSION),
        )
        try:
            index = open_index(index_url, namespace=namespace, params=params, **(index_options or {}))
        except ParameterMismatch as exc:
            # bands only: re-banding answers it; with fingerprints of another kind as well, it would not
            if "_bands:" not in str(exc) or any(f"{name}:" in str(exc) for name in ("bits", "tokenizer",
                                                                                     "features_version")):
                raise
            if not reset:
                raise ParameterMismatch(f"{exc}. {WIDER_THRESHOLD}") from exc
            # a reset asks for an empty namespace with these settings: the index gets bands for them
            reset_layout(index_url, params, namespace=namespace, **(index_options or {}))
            index = open_index(index_url, namespace=namespace, params=params, **(index_options or {}))
        try:
            if reset:
                index.reset()
            return cls(
                index, fingerprinter, title_max_distance=title_max_distance,
                body_max_distance=body_max_distance, dynamic_threshold=dynamic_threshold, **own,
            )
        except BaseException:
            index.close()
            raise

    # -- the rule -------------------------------------------------------------------------------

    def fingerprint(self, title: Any, body: Any) -> Fingerprints:
        """Normalize and fingerprint (CPU only, no index access: safe to run on any thread)."""
        return self.fingerprinter.fingerprint(title, body)

    def body_distance_for(self, body_chars: int) -> int:
        """The body threshold for a body of this many normalized characters."""
        k = self.body_max_distance
        if self.dynamic_threshold:
            if body_chars < SHORT_BODY_CHARS:
                k += SHORT_BODY_BONUS
            elif body_chars > LONG_BODY_CHARS:
                k = max(0, k - LONG_BODY_MALUS)
        return k

    def decide(self, fps: Fingerprints, url: str | None = None, seen_at: float | None = None) -> Verdict:
        """One atomic check-and-add of already computed fingerprints."""
        if not fps.usable:
            return Verdict("skipped", reason="no_text")
        query = self._query(fps, url, time.time() if seen_at is None else seen_at, None)
        return self._verdict(fps, self.index.check_and_add_many([query], flagged=self._flagged)[0])

    def decide_many(
        self,
        items: Sequence[tuple[Fingerprints, str | None]],
        seen_at: float | None = None,
        request_ids: Sequence[str] | None = None,
    ) -> list[Verdict]:
        """:meth:`decide` for each ``(fingerprints, url)`` in order, with one index call for the lot.

        A later item is checked against the earlier ones. On SQLite the batch is one transaction (one
        fsync); every verdict is durable when this returns. ``request_ids`` (one per item, kept
        across retries of the batch) make a retry idempotent where a batch can be applied in part
        (Redis).
        """
        now = time.time() if seen_at is None else seen_at
        queries = [
            self._query(fps, url, now, None if request_ids is None else request_ids[n])
            for n, (fps, url) in enumerate(items)
            if fps.usable
        ]
        outcomes = iter(self.index.check_and_add_many(queries, flagged=self._flagged) if queries else ())
        return [
            self._verdict(fps, next(outcomes)) if fps.usable else Verdict("skipped", reason="no_text")
            for fps, _ in items
        ]

    def peek(self, fps: Fingerprints, url: str | None = None, now: float | None = None) -> Verdict:
        """What :meth:`decide` would answer now, without adding or recording anything (the dry run
        behind ``scrapy-simhash check``): the same query, the same rule."""
        if not fps.usable:
            return Verdict("skipped", reason="no_text")
        query = self._query(fps, url, time.time() if now is None else now, None)
        return self._verdict(fps, Outcome(match=self.index.peek(query), entry_id=None))

    def _query(self, fps: Fingerprints, url: str | None, now: float, request_id: str | None) -> Query:
        """The index query for usable fingerprints: thresholds, expiry and tiers from the settings."""
        return Query(
            title_fp=fps.title,
            body_fp=fps.body,
            title_k=self.title_max_distance,
            body_k=self.body_distance_for(fps.body_chars),
            url=None if url is None else url.encode("utf-8", "replace").decode("utf-8"),  # no lone surrogates
            title=fps.title_text[:200] or None,
            seen_at=now,
            not_before=None if self.ttl_days is None else now - self.ttl_days * 86400,
            numbers=fps.numbers,
            title_numbers=self.title_numbers,
            sentences=fps.sentences,
            sentences_shared=self.sentences_shared,
            short_body=fps.short_body,
            figures=fps.figures,
            request_id=request_id,
            title_features=fps.title_features,
            owner=self.owner,
            chars=fps.chars,
            chars_k=chars_distance(self.fingerprinter.bits),
        )

    def _verdict(self, fps: Fingerprints, outcome: Outcome) -> Verdict:
        if outcome.error is not None:
            return Verdict("error", reason=outcome.error, title_fp=fps.title, body_fp=fps.body)
        match = outcome.match
        if match is None:
            return Verdict("new", entry_id=outcome.entry_id, title_fp=fps.title, body_fp=fps.body)
        return Verdict(
            "flagged" if match.tier in self._flagged else "duplicate",
            tier=match.tier, distance=match.distance, original=match.entry, title_fp=fps.title, body_fp=fps.body,
            score=match.score,
        )

    def check_and_add(
        self, title: Any, body: Any, url: str | None = None, seen_at: float | None = None
    ) -> Verdict:
        """Fingerprint an item and check-and-add it: title tier, else body tier, else new."""
        return self.decide(self.fingerprint(title, body), url=url, seen_at=seen_at)

    def purge_expired(self, now: float | None = None) -> int:
        """Remove entries older than the TTL (no-op without one); returns how many."""
        if self.ttl_days is None:
            return 0
        return self.index.purge((time.time() if now is None else now) - self.ttl_days * 86400)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def required_params(
    bits: int, title_k: int, body_k: int, dynamic_threshold: bool = False, features_version: str = FEATURES_VERSION,
) -> IndexParams:
    """Index parameters that answer these thresholds exactly (k + 1 pigeonhole bands per tier), for
    fingerprints of ``features_version`` (:attr:`.Fingerprinter.features_version`)."""
    if title_k < 0 or body_k < 0:
        raise ValueError("distances must be >= 0")
    body_bands = body_k + 1 + (SHORT_BODY_BONUS if dynamic_threshold else 0)
    return IndexParams(bits=bits, title_bands=title_k + 1, body_bands=body_bands, features_version=features_version)
