"""The Redis index's record (``<prefix>:meta``) at open: read, created when absent, upgraded from the
schema versions this one reads as they are; and the re-banding lock that refuses opens meanwhile.

Kept apart from :mod:`.redis` (the index and its hot path); :mod:`.redis_reband` writes the record
and holds the lock.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..base import IndexOpenError, IndexParams
from ..meta import FORMAT, new_meta
from .client import SWAP
from .keys import reband_lock

#: 2: the compact layout (binary records in small hashes, linear hashing, time buckets); 3: the
#: tables looked up by a fingerprint, sentence hash or URL file ids under the key's 4-byte mix; 4:
#: under 2 bytes of it (quotienting), a band table a band holding bare fingerprints, records
#: without the URL's scheme and the title's length, CJK titles in UTF-16; 5: entries in lists of 64;
#: 6: a band key crowded with fingerprints splits them into a node of child keys (not one sorted set read whole);
#: 7: layout generations (a re-banded index's band tables are named by theirs) and marker values compared.
SCHEMA_VERSION = 7
#: Older schema versions this one reads as they are: 6 is 7 never re-banded, 5 is 6 without split band keys
#: (its crowded keys' sorted sets are read as before). A writable open records the new version, which older
#: releases refuse.
READS_AS_IS = (5, 6)
logger = logging.getLogger(__name__)


def not_rebanding(client: Any, prefix: str, location: str) -> None:
    """Refuse an open while a re-banding holds the index (:mod:`.redis_reband`)."""
    if client.exists(reband_lock(prefix)):
        raise IndexOpenError(
            f"index {location} is being re-banded (scrapy-simhash reband): open it when that is done "
            "(a re-banding that died lets go within half a minute)"
        )


def read_record(
    client: Any, response_error: type[Exception], prefix: str, location: str, requested: IndexParams | None,
    *, create: bool, readonly: bool,
) -> tuple[dict[str, Any], str]:
    """The index's record and its text: created from ``requested`` (or the defaults) when absent and
    ``create`` (one of several processes creating it at once wins: ``SET NX``); a record this version
    reads as it is upgraded to :data:`SCHEMA_VERSION` unless ``readonly``. Not yet checked against
    ``requested`` (:func:`.meta.verify_meta`)."""
    meta_key = f"{prefix}:meta"
    try:
        try:
            raw = client.get(meta_key)
        except UnicodeDecodeError as exc:
            raise IndexOpenError(
                f"{location}: unreadable key {meta_key!r} (binary, not JSON text: not a scrapy-simhash index): {exc}"
            ) from exc
        if raw is None:
            if readonly or not create:
                why = "opened read-only" if readonly else "create=False"
                raise IndexOpenError(f"index {location} does not exist (no key {meta_key!r}; {why})")
            record = new_meta(requested or IndexParams(), SCHEMA_VERSION, fingerprint_storage="binary")
            client.set(meta_key, json.dumps({"backend": "redis", **record}, sort_keys=True), nx=True)
            raw = client.get(meta_key)
    except response_error as exc:
        if "WRONGTYPE" in str(exc):
            raise IndexOpenError(
                f"{location}: key {meta_key!r} holds something else: not a scrapy-simhash index"
            ) from exc
        raise
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise TypeError(f"a JSON {type(meta).__name__}, not an object")
    except (ValueError, TypeError) as exc:
        raise IndexOpenError(f"{location}: unreadable key {meta_key!r} (not a scrapy-simhash index?): {exc}") from exc
    if meta.get("format") != FORMAT or meta.get("schema_version") not in READS_AS_IS:
        return meta, raw
    # as this version's; written (only if nobody changed it meanwhile) so that older releases refuse it
    new = {**meta, "schema_version": SCHEMA_VERSION}
    if readonly:
        return new, raw
    text = json.dumps(new, sort_keys=True)
    client.eval(SWAP, 1, meta_key, raw, text)
    logger.info("scrapy-simhash: Redis index %s: schema version %s upgraded in place to %s (nothing else "
                "rewritten; older scrapy-simhash releases refuse it from now on)",
                location, meta["schema_version"], SCHEMA_VERSION)
    return new, text
