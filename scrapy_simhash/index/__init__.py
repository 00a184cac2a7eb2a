"""``open_index(url)``: the band index a URL names (a SQLite file or a Redis server).

Accepted locations
------------------
* a plain path (``str`` or ``os.PathLike``), ``~`` expanded: ``index.sqlite3``, ``/data/index.sqlite3``;
* ``sqlite:///<path>``, following SQLAlchemy's convention: everything after ``sqlite:///`` is the
  path, so ``sqlite:///index.sqlite3`` is *relative* to the current directory and
  ``sqlite:////var/data/index.sqlite3`` (four slashes) is absolute;
* ``redis://[:password@]host[:port][/db][?prefix=name]``, ``rediss://`` (TLS) and ``unix://`` name a
  Redis index (:mod:`.redis`, needs ``pip install scrapy-simhash[redis]``); ``prefix`` (default
  ``simhash``) lets several indexes share one database. Any other scheme is an error.

``params=None`` means "whatever the file records" (inspection tools), or the defaults when the
file is created. Passing params requires an exact match (:class:`ParameterMismatch` otherwise).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from .base import (
    FEATURES_VERSION,
    TIERS,
    BandIndex,
    Decision,
    Entry,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    ParameterMismatch,
    Query,
    SimhashIndexError,
    Tier,
)

__all__ = [
    "FEATURES_VERSION",
    "TIERS",
    "BandIndex",
    "Decision",
    "Entry",
    "IndexOpenError",
    "IndexParams",
    "IndexWriteError",
    "Match",
    "Outcome",
    "ParameterMismatch",
    "Query",
    "SimhashIndexError",
    "Tier",
    "open_index",
    "reset_layout",
    "sqlite_path",
]

# A scheme needs 2+ characters so that Windows drive letters ("C:\\…") stay plain paths.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def sqlite_path(url: str | os.PathLike[str]) -> str | None:
    """The file path a SQLite location names, or None if ``url`` has another scheme."""
    if not isinstance(url, str):
        return os.fspath(url)
    m = _SCHEME.match(url)
    if m is None:
        return url
    if m.group(1).lower() != "sqlite":
        return None
    if not url.lower().startswith("sqlite:///"):
        raise IndexOpenError(
            f"cannot open {url!r}: write sqlite:///relative/path.sqlite3 or sqlite:////absolute/path.sqlite3"
        )
    path = url[len("sqlite:///") :]
    if not path or path.startswith(":memory:"):
        raise IndexOpenError(f"{url!r} names no file: the index must be a file to be shared and to persist")
    return path


def open_index(
    url: str | os.PathLike[str],
    *,
    namespace: str = "default",
    params: IndexParams | None = None,
    create: bool = True,
    readonly: bool = False,
    busy_timeout: float = 30.0,
    redis_params: Mapping[str, Any] | None = None,
    redis_unsafe: str = "refuse",
) -> BandIndex:
    """Open (or create, unless ``create=False`` or ``readonly``) the band index at ``url``.

    Errors name the location: :class:`IndexOpenError` (missing, not ours, corrupt, unreachable,
    unknown scheme), :class:`ParameterMismatch` (built with other parameters). ``busy_timeout`` is
    the SQLite lock wait or the Redis command timeout; ``redis_params`` (``SIMHASH_REDIS_PARAMS``)
    go to the Redis client, and ``redis_unsafe`` (``SIMHASH_REDIS_UNSAFE``: ``"refuse"`` or ``"warn"``)
    says what to do with a Redis server that may evict keys or does not persist; SQLite ignores both.
    """
    path = sqlite_path(url)
    if path is None:
        assert isinstance(url, str)
        scheme = _SCHEME.match(url).group(1).lower()  # type: ignore[union-attr]
        if scheme in ("redis", "rediss", "unix"):
            from .redis.index import RedisIndex

            return RedisIndex.open(
                url, namespace=namespace, params=params, create=create, readonly=readonly,
                busy_timeout=busy_timeout, redis_params=redis_params, unsafe=redis_unsafe,
            )
        from .redis.index import redacted

        raise IndexOpenError(
            f"cannot open {redacted(url)}: unknown index scheme {scheme!r} "
            "(use a file path or sqlite:///path/to/index.sqlite3)"
        )
    from .sqlite.index import SqliteIndex

    return SqliteIndex.open(
        path, namespace=namespace, params=params, create=create, readonly=readonly, busy_timeout=busy_timeout
    )


def reset_layout(url: str | os.PathLike[str], params: IndexParams, *, namespace: str = "default",
                 **options: Any) -> None:
    """Make the index at ``url`` answer ``params``' thresholds for a reset of ``namespace``
    (``SIMHASH_RESET``), which empties it: the index is re-banded, its other namespaces' entries kept
    (never to fewer bands than it has: they keep the thresholds they had). ``options``: what
    :func:`open_index` takes."""
    path = sqlite_path(url)
    if path is not None:
        from .sqlite.reband import reband

        reband(path, title_bands=params.title_bands, body_bands=params.body_bands, at_least=True)
        return
    from .redis.index import RedisIndex
    from .redis.reband import reband as reband_redis

    index = open_index(url, namespace=namespace, **options)  # as it is recorded
    try:
        assert isinstance(index, RedisIndex)
        index.reset()  # first: its entries are not re-banded
        reband_redis(index, title_bands=params.title_bands, body_bands=params.body_bands, at_least=True)
    finally:
        index.close()
