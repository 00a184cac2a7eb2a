"""Replaying labelled pairs under other settings: what ``scrapy-simhash tune`` measures and suggests.

Each labelled pair (:mod:`scrapy_simhash.labels`) is decided again by the rule itself
(:func:`scrapy_simhash.index.rule.peek`) over a store that holds only the pair's earlier entry, once
for every candidate setting: title and body thresholds, the title tier's number guard
(``SIMHASH_TITLE_NUMBERS``) and the sentence tier (``SIMHASH_SENTENCES_SHARED``). A pair labelled
*same story* that the setting calls a duplicate is a true positive, one it admits a false negative;
a pair labelled *different stories* that it calls a duplicate is a false positive. Precision and
recall come with Wilson score intervals (95 %), which stay honest with a handful of labels: 5 of 5
is "somewhere between 57 % and 100 %", not "100 %".

A pair is judged on its own: in the index, another earlier entry could decide the later item first.
The later item's fingerprints enter as their distances to the earlier entry (what the rule compares);
where a distance is unknown (a decision whose dropped body the index never kept) and the setting
would admit the pair through the tiers that are known, the pair's outcome is unknown: it is counted
apart (``?``), and the ranking counts it as a mistake (pessimistic), so that a setting never looks
better for leaving pairs unknown. The index's own recorded decisions (unlabelled) are replayed the
same way to show how many of them each setting would still make.

Body thresholds are replayed as fixed ones (``SIMHASH_DYNAMIC_THRESHOLD`` moves them by the body's
length, which a label does not keep). The suggestion is the setting with the best pessimistic F1
score; among equals, the one nearest the current settings (docs/decisions/0811-tune-ranking.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .index.base import Entry, Match, Query, Tier
from .index.rule import peek
from .labels import Label, Pair

#: z of the two-sided 95 % interval.
Z95 = 1.959963984540054


@dataclass(frozen=True, order=True)
class Setting:
    """The settings a replay varies."""

    title_max_distance: int
    body_max_distance: int
    title_numbers: int
    sentences_shared: int

    def as_settings(self) -> dict[str, int]:
        """Setting name → value, as ``settings.py`` writes them."""
        return {"SIMHASH_TITLE_MAX_DISTANCE": self.title_max_distance,
                "SIMHASH_BODY_MAX_DISTANCE": self.body_max_distance,
                "SIMHASH_TITLE_NUMBERS": self.title_numbers,
                "SIMHASH_SENTENCES_SHARED": self.sentences_shared}

    def changes(self, other: Setting) -> int:
        """How far this setting is from ``other`` (threshold bits, plus one per other switch value)."""
        return (abs(self.title_max_distance - other.title_max_distance)
                + abs(self.body_max_distance - other.body_max_distance)
                + (self.title_numbers != other.title_numbers) + (self.sentences_shared != other.sentences_shared))


class _OneEntry:
    """A :class:`~scrapy_simhash.index.rule.Store` holding one entry, read-only."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry

    def _fp(self, tier: Tier) -> int | None:
        return self.entry.title_fp if tier == "title" else self.entry.body_fp

    def candidates(self, tier: Tier, fp: int) -> Iterable[int]:
        own = self._fp(tier)
        return () if own is None else (own,)

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        if self._fp(tier) != fp or offset > 0 or (limit is not None and limit < 1):
            return []
        return [self.entry]

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        shared = len(set(hashes).intersection(self.entry.sentences))
        return [(self.entry, shared, len(self.entry.sentences))] if shared else []

    def insert(self, query: Query, seen_at: float) -> int:  # pragma: no cover - peek never writes
        raise AssertionError("a replay never writes")

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:  # pragma: no cover
        raise AssertionError("a replay never writes")


def _at(fp: int | None, distance: int | None) -> int | None:
    """A fingerprint ``distance`` bits from ``fp`` (its lowest bits flipped): what the rule compares."""
    if fp is None or distance is None:
        return None
    return fp ^ ((1 << distance) - 1)


def replay(pair: Pair, setting: Setting) -> bool | None:
    """Would ``setting`` call the pair's later item a duplicate of its earlier entry? None: unknown."""
    e, item = pair.earlier, pair.later
    entry = Entry(id=1, namespace=pair.namespace, url=e.url, title=e.title, first_seen=0.0, title_fp=e.title_fp,
                  body_fp=e.body_fp, numbers=e.numbers, sentences=e.sentences, short_body=e.short_body)
    query = Query(
        title_fp=_at(e.title_fp, pair.title_distance), body_fp=_at(e.body_fp, pair.body_distance),
        title_k=setting.title_max_distance, body_k=setting.body_max_distance, url=item.url, seen_at=1.0,
        numbers=item.numbers, title_numbers=setting.title_numbers, sentences=item.sentences,
        sentences_shared=setting.sentences_shared, short_body=item.short_body, figures=bool(item.figures),
    )
    if peek(_OneEntry(entry), query) is not None:
        return True
    return None if pair.unknown else False


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None when ``n`` is 0)."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Score:
    """How one setting does on the labels (and on the index's recorded decisions)."""

    setting: Setting
    tp: int
    fp: int
    fn: int
    tn: int
    unknown_same: int
    unknown_different: int
    decisions: int = 0  # recorded decisions replayed
    decisions_kept: int = 0  # … that this setting would still make
    decisions_unknown: int = 0

    @property
    def unknown(self) -> int:
        return self.unknown_same + self.unknown_different

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def precision_interval(self) -> tuple[float, float] | None:
        return wilson(self.tp, self.tp + self.fp)

    @property
    def recall_interval(self) -> tuple[float, float] | None:
        return wilson(self.tp, self.tp + self.fn)

    @property
    def pessimistic_f1(self) -> float:
        """F1 with every unknown outcome counted as a mistake."""
        tp, fp, fn = self.tp, self.fp + self.unknown_different, self.fn + self.unknown_same
        return 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": self.setting.as_settings(), "tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn,
            "unknown": self.unknown, "precision": self.precision, "precision_95": self.precision_interval,
            "recall": self.recall, "recall_95": self.recall_interval, "f1_pessimistic": self.pessimistic_f1,
            "decisions": self.decisions, "decisions_kept": self.decisions_kept,
            "decisions_unknown": self.decisions_unknown,
        }


def candidates(current: Setting, title_up_to: int, body_up_to: int) -> list[Setting]:
    """Every setting tried: title and body thresholds from 0, the number guard off, at the current
    value and at 50/70 %, the sentence tier off and at the current value (50 when off)."""
    numbers = sorted({0, 50, 70, current.title_numbers})
    sentences = sorted({0, current.sentences_shared or 50})
    return [Setting(t, b, n, s) for t in range(max(title_up_to, current.title_max_distance) + 1)
            for b in range(max(body_up_to, current.body_max_distance) + 1) for n in numbers for s in sentences]


class _Replays:
    """:func:`replay` of one pair, once per distinct outcome: a threshold enters the rule only as
    "is the pair's distance within it", so the verdict depends on the setting through
    (title distance ≤ title threshold, body distance ≤ body threshold, number guard, sentence tier)."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.known: dict[tuple[bool | None, bool | None, int, int], bool | None] = {}

    def __call__(self, s: Setting) -> bool | None:
        td, bd = self.pair.title_distance, self.pair.body_distance
        key = (None if td is None else td <= s.title_max_distance, None if bd is None else bd <= s.body_max_distance,
               s.title_numbers, s.sentences_shared)
        if key not in self.known:
            self.known[key] = replay(self.pair, s)
        return self.known[key]


def score(labels: Sequence[Label], settings: Sequence[Setting], decisions: Sequence[Pair] = ()) -> list[Score]:
    """Each setting's counts on ``labels`` and on the recorded ``decisions``, in ``settings`` order."""
    labelled = [(_Replays(label.pair), label.same) for label in labels]
    recorded = [_Replays(pair) for pair in decisions]
    out = []
    for s in settings:
        tp = fp = fn = tn = us = ud = 0
        for replays, same in labelled:
            verdict = replays(s)
            if verdict is None:
                us += same
                ud += not same
            elif verdict:
                tp += same
                fp += not same
            else:
                fn += same
                tn += not same
        kept = unknown = 0
        for replays in recorded:
            verdict = replays(s)
            kept += verdict is True
            unknown += verdict is None
        out.append(Score(s, tp, fp, fn, tn, us, ud, len(decisions), kept, unknown))
    return out


def ranked(scores: Sequence[Score], current: Setting) -> list[Score]:
    """Best first: pessimistic F1, then fewest changes from ``current``, then the smaller thresholds."""
    return sorted(scores, key=lambda sc: (-round(sc.pessimistic_f1, 9), sc.setting.changes(current), sc.setting))
