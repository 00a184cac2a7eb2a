"""Labels: a person's judgement of pairs of items (same story or not), kept as JSON Lines next to the index.

A *pair* is a later item and the earlier entry it was compared with:

* a **decision**: an item the index recorded as a duplicate (or flagged) and the original it matched;
* a **near miss**: an entry admitted as new and its nearest earlier entry by title or body fingerprint.

``scrapy-simhash review`` shows pairs and appends one line per label, ``scrapy-simhash tune`` replays
the labelled pairs under other settings (:mod:`scrapy_simhash.tune`), and ``explain`` shows the label of
a URL's pair. The file is plain text a person can read, edit, merge and keep in version control.

Where: for a SQLite index, ``<index file without its suffix>.labels.jsonl`` in the index's directory
(:func:`default_labels_path`); a Redis index has no directory, its labels go where ``--labels`` says.

One JSON object a line (a later line about the same pair replaces an earlier one)::

    {"label": "same" | "different", "kind": "decision" | "near_miss", "namespace": "default",
     "bits": 64, "status": "duplicate" | "flagged" | "new", "tier": "title" | "body" | "sentence",
     "distance": 2, "title_distance": 2 | null, "body_distance": 14 | null, "unknown": ["body"],
     "later": SIDE, "earlier": SIDE, "at": "2026-12-05T16:00:00Z", "by": "alice"}

    SIDE = {"url": …, "entry": id | null, "title": …, "title_fp": hex | null, "body_fp": hex | null,
            "numbers": signature | null, "sentences": [hex, …], "short_body": digest | null,
            "figures": true | false | null}

``title_distance``/``body_distance`` are null when a side has no fingerprint of that tier (the tier
cannot match); ``unknown`` names the tiers whose outcome could not be known: the index does not keep
a dropped item's body (nor its sentences and numbers), so a decision's body distance is known when the
body tier decided it, or when the item itself was given (``review --items``: the crawl's export, e.g. crawled with
``SIMHASH_*_ACTION = "flag"`` so that no item is dropped). Its title fingerprint is taken again from the
normalized title the decision stored (checked on the original's stored title first).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .index import sqlite_path
from .index.base import Decision, Entry, IndexOpenError, Tier
from .timefmt import iso

Judgement = Literal["same", "different"]
JUDGEMENTS: tuple[Judgement, ...] = ("same", "different")
#: Suffix of the labels file next to a SQLite index.
LABELS_SUFFIX = ".labels.jsonl"


class LabelsError(ValueError):
    """A labels file that cannot be read or written."""


@dataclass(frozen=True)
class Side:
    """One item of a pair, as much of it as the rule reads."""

    url: str | None
    entry: int | None
    title: str | None
    title_fp: int | None
    body_fp: int | None
    numbers: str | None = None
    sentences: tuple[str, ...] = ()
    short_body: str | None = None
    figures: bool | None = None

    @classmethod
    def of_entry(cls, e: Entry) -> Side:
        return cls(e.url, e.id, e.title, e.title_fp, e.body_fp, e.numbers, tuple(e.sentences), e.short_body)

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "entry": self.entry, "title": self.title, "title_fp": _hex(self.title_fp),
                "body_fp": _hex(self.body_fp), "numbers": self.numbers, "sentences": list(self.sentences),
                "short_body": self.short_body, "figures": self.figures}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Side:
        sentences = d.get("sentences") or ()
        if not isinstance(sentences, (list, tuple)) or not all(isinstance(s, str) for s in sentences):
            raise ValueError("sentences must be a list of hex strings")
        return cls(_opt(d, "url", str), _opt(d, "entry", int), _opt(d, "title", str), _fp(d.get("title_fp")),
                   _fp(d.get("body_fp")), _opt(d, "numbers", str), tuple(sentences), _opt(d, "short_body", str),
                   _opt(d, "figures", bool))

    @property
    def key(self) -> str:
        return self.url if self.url else f"entry #{self.entry}"


@dataclass(frozen=True)
class Pair:
    """A later item and the earlier entry it was compared with, and how far apart they are."""

    kind: Literal["decision", "near_miss"]
    status: str  # "duplicate" | "flagged" (a decision) | "new" (a near miss)
    tier: Tier  # the deciding tier, or the tier of the near miss
    distance: int
    later: Side
    earlier: Side
    title_distance: int | None
    body_distance: int | None
    unknown: tuple[Tier, ...] = ()
    namespace: str = "default"
    bits: int = 64

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the pair in a labels file: the later item's URL (or entry id), the earlier's."""
        return self.later.key, self.earlier.key

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "bits": self.bits, "status": self.status,
                "tier": self.tier, "distance": self.distance, "title_distance": self.title_distance,
                "body_distance": self.body_distance, "unknown": list(self.unknown),
                "later": self.later.as_dict(), "earlier": self.earlier.as_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Pair:
        kind = d.get("kind")
        tier = d.get("tier")
        unknown = d.get("unknown") or []
        if kind not in ("decision", "near_miss"):
            raise ValueError(f"kind must be 'decision' or 'near_miss', not {kind!r}")
        if tier not in ("title", "body", "sentence"):
            raise ValueError(f"tier must be title, body or sentence, not {tier!r}")
        if not isinstance(unknown, list) or not set(unknown) <= {"title", "body", "sentence"}:
            raise ValueError("unknown must be a list of tiers (title, body, sentence)")
        for side in ("later", "earlier"):
            if not isinstance(d.get(side), dict):
                raise ValueError(f"{side} must be an object")
        return cls(kind, str(d.get("status")), tier, _int(d.get("distance"), "distance"),
                   Side.from_dict(d["later"]), Side.from_dict(d["earlier"]),
                   _opt_distance(d, "title_distance"), _opt_distance(d, "body_distance"), tuple(unknown),
                   str(d.get("namespace", "default")), _int(d.get("bits", 64), "bits"))


@dataclass(frozen=True)
class Label:
    """A pair and a person's judgement of it."""

    pair: Pair
    label: Judgement
    at: str
    by: str
    line: int = 0  # 1-based line in its file

    @property
    def same(self) -> bool:
        return self.label == "same"

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, **self.pair.as_dict(), "at": self.at, "by": self.by}


# ------------------------------------------------------------------------------------------------
# The file
# ------------------------------------------------------------------------------------------------


def default_labels_path(location: str | os.PathLike[str]) -> Path | None:
    """The labels file of the index at ``location`` (a path or ``sqlite:///`` URL): next to it, named
    after it (``index.sqlite3`` → ``index.labels.jsonl``); None for another kind of index (Redis: no
    directory) or a location that names no file."""
    try:
        text = sqlite_path(location)
    except IndexOpenError:
        return None
    if not text:
        return None
    path = Path(text)
    return path.with_name((path.stem if path.suffix else path.name) + LABELS_SUFFIX)


def read_labels(path: str | os.PathLike[str], namespace: str | None = None,
                bad: Callable[[int, str], None] | None = None) -> list[Label]:
    """The labels of ``path`` (of ``namespace`` when given), the last one of each pair, in file order.
    A line that is not a label is described to ``bad(line_number, why)`` and skipped; without ``bad``
    it raises :class:`LabelsError`. A missing file is no labels."""
    p = Path(path)
    if not p.exists():
        return []
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise LabelsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    latest: dict[tuple[str, str], Label] = {}
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            label = parse_label(line, n)
        except ValueError as exc:
            why = str(exc)
            if bad is None:
                raise LabelsError(f"{path}, line {n}: not a label: {why}") from exc
            bad(n, why)
            continue
        if namespace is None or label.pair.namespace == namespace:
            latest.pop(label.pair.key, None)
            latest[label.pair.key] = label
    return list(latest.values())


def parse_label(line: bytes | str, n: int = 0) -> Label:
    """One line of a labels file (ValueError when it is not a label)."""
    try:
        d = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError("not JSON" if not isinstance(exc, UnicodeDecodeError) else "not UTF-8") from exc
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    if d.get("label") not in JUDGEMENTS:
        raise ValueError(f"label must be one of {JUDGEMENTS}, not {d.get('label')!r}")
    pair = Pair.from_dict(d)
    return Label(pair, d["label"], str(d.get("at", "")), str(d.get("by", "")), n)


def append_label(path: str | os.PathLike[str], label: Label) -> None:
    """Add one label to the file (created when missing), on disk when this returns: a review stopped
    at any point keeps every label given before."""
    line = json.dumps(label.as_dict(), ensure_ascii=False, sort_keys=False) + "\n"
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise LabelsError(f"cannot write {path}: {exc.strerror or exc}") from exc


def labels_of_url(labels: Iterable[Label], url: str) -> list[Label]:
    """The labels of pairs in which ``url`` is the later or the earlier item."""
    return [lb for lb in labels if url in (lb.pair.later.url, lb.pair.earlier.url)]


# ------------------------------------------------------------------------------------------------
# Pairs
# ------------------------------------------------------------------------------------------------


def _distance(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else (a ^ b).bit_count()


def entry_pair(later: Entry, earlier: Entry, tier: Tier, *, bits: int = 64) -> Pair:
    """A near miss: two stored entries (everything the rule reads is known)."""
    td, bd = _distance(later.title_fp, earlier.title_fp), _distance(later.body_fp, earlier.body_fp)
    distance = td if tier == "title" else bd
    return Pair("near_miss", "new", tier, distance if distance is not None else 0, Side.of_entry(later),
                Side.of_entry(earlier), td, bd, (), later.namespace, bits)


def decision_pair(decision: Decision, *, bits: int = 64, item: Side | None = None,
                  title_fp: Callable[[str], int | None] | None = None) -> Pair | None:
    """A recorded decision as a pair (None when its original is gone). ``item``: the decided item's
    own fingerprints and signatures (from its text), when known; else its title fingerprint is taken
    again from the decision's stored title with ``title_fp`` (when given) and its body distance is
    known only when the body tier decided."""
    e = decision.original
    if e is None:
        return None
    earlier = Side.of_entry(e)
    unknown: list[Tier] = []
    if item is not None:
        later = Side(decision.url, None, decision.title or item.title, item.title_fp, item.body_fp, item.numbers,
                     item.sentences, item.short_body, item.figures)
        td, bd = _distance(later.title_fp, e.title_fp), _distance(later.body_fp, e.body_fp)
    else:
        fp = title_fp(decision.title) if title_fp is not None and decision.title else None
        later = Side(decision.url, None, decision.title, fp, None)
        td = decision.distance if decision.tier == "title" else _distance(fp, e.title_fp)
        if td is None and e.title_fp is not None:
            unknown.append("title")
        bd = decision.distance if decision.tier == "body" else None
        if bd is None and e.body_fp is not None:
            unknown.append("body")
        if e.sentences:  # the item's sentences are not kept: the sentence tier cannot be replayed
            unknown.append("sentence")
    return Pair("decision", decision.status, decision.tier, decision.distance, later, earlier, td, bd,
                tuple(unknown), e.namespace, bits)


def nearest_earlier(entries: list[Entry], start: int, tier: Tier) -> Iterator[tuple[int, int, int]]:
    """``(i, j, distance)`` for each entry ``i`` from ``start`` on (oldest first) and its nearest earlier
    entry ``j`` by ``tier`` fingerprint (the earliest of equally near ones), by direct comparison."""
    attr = "title_fp" if tier == "title" else "body_fp"
    fps = [getattr(e, attr) for e in entries]
    for i in range(max(start, 1), len(entries)):
        fp = fps[i]
        if fp is None:
            continue
        best, best_j = None, -1
        for j in range(i):
            other = fps[j]
            if other is None:
                continue
            dist = (fp ^ other).bit_count()
            if best is None or dist < best:
                best, best_j = dist, j
                if dist == 0:
                    break
        if best is not None:
            yield i, best_j, best


def now_iso() -> str:
    """Now, as labels write it (ISO 8601 UTC, to the second)."""
    return iso(time.time()) or ""


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------


def _hex(fp: int | None) -> str | None:
    return None if fp is None else f"{fp:x}"


def _fp(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"a fingerprint must be a hex string, not {value!r}")
    try:
        return int(value, 16)
    except ValueError:
        raise ValueError(f"a fingerprint must be a hex string, not {value!r}") from None


def _opt(d: Mapping[str, Any], name: str, kind: type) -> Any:
    value = d.get(name)
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise ValueError(f"{name} must be {kind.__name__} or null, not {value!r}")
    return value


def _int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 1024:
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return value


def _opt_distance(d: Mapping[str, Any], name: str) -> int | None:
    value = d.get(name)
    return None if value is None else _int(value, name)
