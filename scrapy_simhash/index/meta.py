"""An index's self-description, shared by every backend: its parameters, band layouts and checks.

Each backend stores one JSON record (SQLite: the ``simhash_meta`` table; Redis: the ``<prefix>:meta``
key), with the band layout of :mod:`.bands` that both use, made by :func:`new_meta` when the index
is created, and verifies it with :func:`verify_meta` at every open, so a file or server built with
other parameters is a clear error naming both, never a silent mix of incomparable fingerprints.
:class:`QueryChecks` are the argument checks both backends make before touching their store, and
:func:`stats_dict` the shape of ``stats()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..__version__ import __version__
from ..fingerprint.simhash import SUPPORTED_BITS
from .bands import records
from .base import IndexOpenError, IndexParams, ParameterMismatch, Query, Tier

FORMAT = "scrapy-simhash-index"
#: Stored titles are cut to this many characters.
TITLE_CHARS = 300
#: At most this many bands per tier (SQLite keeps the band number in 6 bits of a band key).
MAX_BANDS = 64


def check_params(params: IndexParams) -> None:
    """Refuse parameters no index can be built with (a ValueError naming the field)."""
    if params.bits not in SUPPORTED_BITS:
        raise ValueError(f"fingerprint size must be one of {SUPPORTED_BITS} bits, not {params.bits!r}")
    for name in ("title_bands", "body_bands"):
        bands = getattr(params, name)
        top = min(params.bits, MAX_BANDS)
        if not isinstance(bands, int) or isinstance(bands, bool) or not 1 <= bands <= top:
            raise ValueError(f"{name} must be between 1 and {top}, not {bands!r}")


#: What a backend records as each tier's layout, from the parameters (JSON values).
LayoutRecords = Callable[[IndexParams], Mapping[Tier, Any]]


def new_meta(
    params: IndexParams, schema_version: int, *, layout_records: LayoutRecords = records, **extra: Any
) -> dict[str, Any]:
    """The record a new index stores about itself (``extra``: what is particular to the backend)."""
    check_params(params)
    tiers = layout_records(params)
    return {
        "format": FORMAT,
        "schema_version": schema_version,
        "params": params.as_dict(),
        "title_layout": tiers["title"],
        "body_layout": tiers["body"],
        **extra,
        "created": time.time(),
        "created_by": f"scrapy-simhash {__version__}",
    }


def verify_meta(
    meta: Mapping[str, Any], location: str, schema_version: int, requested: IndexParams | None, remedy: str,
    *, layout_records: LayoutRecords = records,
) -> IndexParams:
    """The parameters ``meta`` records, after checking that this version reads it and that they
    answer ``requested`` (any, when None). ``remedy`` ends the mismatch message (what to do)."""
    if meta.get("format") != FORMAT:
        raise IndexOpenError(f"{location} is not a scrapy-simhash index (format {meta.get('format')!r})")
    version = meta.get("schema_version")
    if version != schema_version:
        raise IndexOpenError(other_version(meta, location, schema_version, remedy))
    try:
        stored = IndexParams(**meta["params"])
        check_params(stored)
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexOpenError(f"index {location} records unreadable parameters: {exc}") from exc
    for tier, expected in layout_records(stored).items():
        if meta.get(f"{tier}_layout") != expected:
            raise IndexOpenError(
                f"index {location} records {tier}_layout = {meta.get(f'{tier}_layout')!r}, but its parameters "
                f"({tier}_bands={getattr(stored, f'{tier}_bands')}, bits={stored.bits}) imply {expected}: "
                "the index was altered or damaged, refusing it"
            )
    problems = [] if requested is None else stored.incompatibilities(requested)
    if problems:
        hint = f"open it with compatible parameters, or use a new index {remedy}"
        if requested is not None and stored.features_version != requested.features_version:
            hint = other_features(stored.features_version, requested.features_version, remedy)
        raise ParameterMismatch(
            f"index {location} was built with other parameters ({'; '.join(problems)}); it cannot answer "
            f"these queries: {hint}"
        )
    return stored


#: The weighting settings a features version can name after its ';', and how to give each one.
WEIGHTING_SETTINGS = {"top_k": "SIMHASH_TOP_K / --top-k", "max_share": "SIMHASH_MAX_SHARE / --max-share",
                      "tf": "the Fingerprinter's tf"}


def other_features(stored: str, ours: str, remedy: str) -> str:
    """What to do with an index whose fingerprints are of features version ``stored`` when these
    settings make ``ours`` (:attr:`~scrapy_simhash.fingerprint.fingerprinter.Fingerprinter.features_version`:
    the version, then the weighting settings that differ from their defaults).

    The same version with other weighting settings: open it with the settings it records. Another
    version: nothing opens it (re-banding rebuilds band rows, not fingerprints, and an index keeps
    fingerprints, not the texts they were made from), so the index is rebuilt from the items."""
    version, _, settings = str(stored).partition(";")
    if version == ours.partition(";")[0]:
        recorded = [part.partition("=") for part in settings.split(";") if part]
        named = ", ".join(f"{name} = {value} ({WEIGHTING_SETTINGS.get(name, name)})" for name, _, value in recorded)
        return (f"its fingerprints were weighted with other settings ({named or 'the defaults'}) and cannot be "
                f"compared with these: open it with the settings it records, or use a new index {remedy}")
    return (f"its fingerprints were made by another scrapy-simhash version (features version {version!r}; this one "
            f"makes {ours.partition(';')[0]!r}) and can never be compared with ours, nor converted: an index keeps "
            "fingerprints, not the texts they were made from (re-banding does not help, nor SIMHASH_RESET / "
            f"--reset): delete it or use a new index {remedy}, built from your items (`scrapy-simhash import "
            "ITEMS.jsonl --index NEW_INDEX`, ITEMS a feed export of the crawl: JSON lines or a JSON array, gzip or "
            "not) or filled again by the next crawl")


def other_version(meta: Mapping[str, Any], location: str, schema_version: int, remedy: str) -> str:
    """Why an index recording another schema version is refused, and what to do. A release reads
    the one format it writes: there is no converter, since no release wrote any other."""
    version = meta.get("schema_version")
    made_by = meta.get("created_by")
    by = f" (created by {made_by[:60]})" if isinstance(made_by, str) else ""
    newer = isinstance(version, int) and not isinstance(version, bool) and version > schema_version
    made = ("upgrade scrapy-simhash if a newer release made it; otherwise a development build made it"
            if newer else "it was made by an older scrapy-simhash or a development build")
    return (
        f"index {location} has schema version {version!r}{by}; this scrapy-simhash reads version "
        f"{schema_version}: {made}, and no converter exists for a format no release wrote: delete it or use "
        f"a new index {remedy} and let it fill again (SIMHASH_RESET / --reset does not help)"
    )


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


def stats_dict(
    index: Any, backend: str, per: dict[str, dict[str, Any]], band_rows: int,
    where: Mapping[str, Any], about: Mapping[str, Any],
) -> dict[str, Any]:
    """``stats()`` of either backend: location (and ``where``: e.g. the Redis key prefix), record,
    ``about`` (what is particular to the backend: file size, server version), parameters, layouts,
    and per namespace entries/oldest/newest/decisions; the top-level ``entries``/``oldest``/
    ``newest``/``decisions`` are the index's own namespace's."""
    mine = per.get(index.namespace, {"entries": 0, "oldest": None, "newest": None, "decisions": 0})
    meta = index._meta
    return {
        "backend": backend,
        "location": index.location,
        **where,
        "format": meta.get("format"),
        "schema_version": meta.get("schema_version"),
        "created": meta.get("created"),
        "created_by": meta.get("created_by"),
        **about,
        "params": index.params.as_dict(),
        "title_layout": meta.get("title_layout"),
        "body_layout": meta.get("body_layout"),
        "readonly": index._readonly,
        "namespace": index.namespace,
        "entries": mine["entries"],
        "oldest": mine["oldest"],
        "newest": mine["newest"],
        "decisions": mine["decisions"],
        "band_rows": band_rows,
        "namespaces": per,
    }
