"""What runs in a :class:`~scrapy_simhash.workers.fingerprints.FingerprintPool` worker process: its
start (the engine warmed, the crawl's index opened), the calls it answers (fingerprints; with the
index, verdicts too); and the plain-data options the crawl process sends it. The signals and the exit
of every worker are the pool's (:mod:`~scrapy_simhash.workers.pool`)."""

from __future__ import annotations

import inspect
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from multiprocessing.connection import Connection
from typing import Any

from ..engine import Deduplicator, Verdict
from ..fingerprint.fingerprinter import Fingerprinter, Fingerprints
from ..index import SimhashIndexError
from . import messages
from .pool import bootstrap, exit_now

logger = logging.getLogger(__name__)

_FINGERPRINTER_OPTIONS = frozenset(inspect.signature(Fingerprinter).parameters)
_SAMPLE = ("江城地铁十二号线今日开通 Harbour city opens tidal plant",
           "<p>本报讯 2023年6月18日上午9时，江城地铁十二号线正式开通运营，全长38公里。</p>"
           "<p>The plant's 14 turbines can produce up to 32 megawatts, enough for about 20,000 homes.</p>")


def fingerprinter_options(engine_options: dict[str, Any]) -> dict[str, Any]:
    """The :class:`Fingerprinter` keywords among :meth:`Deduplicator.open`'s, as plain data (patterns
    as ``(pattern, flags)``, paths as strings, word lists as lists) for the workers."""
    options = {k: v for k, v in engine_options.items() if k in _FINGERPRINTER_OPTIONS}
    if options.get("title_patterns"):
        options["title_patterns"] = [(p.pattern, p.flags) if isinstance(p, re.Pattern) else (p, 0)
                                     for p in options["title_patterns"]]
    if options.get("user_dict"):
        options["user_dict"] = os.fspath(options["user_dict"])
    stop_words = options.get("stop_words")
    if stop_words is not None:
        options["stop_words"] = (os.fspath(stop_words) if isinstance(stop_words, (str, os.PathLike))
                                 else list(stop_words))
    return options


def index_options(index_url: str, engine_options: dict[str, Any], owner: str | None, retries: int,
                  retry_delay: float, identity: str | None = None) -> dict[str, Any]:
    """What a worker needs to open the crawl's index and check items as the crawl process would:
    :meth:`Deduplicator.open`'s options but the :class:`Fingerprinter`'s (and ``reset``: the crawl
    process did it), the owner of the entries it adds, the index retries, and the ``identity`` of
    the index the crawl process opened (a Redis namespace's marker), which a worker's must have."""
    dedup = {k: v for k, v in engine_options.items() if k not in _FINGERPRINTER_OPTIONS and k != "reset"}
    return {"url": index_url, "dedup": dedup, "owner": owner, "retries": retries, "retry_delay": retry_delay,
            "identity": identity}


_fingerprinter: Fingerprinter | None = None
_dedup: Deduplicator | None = None
_index: dict[str, Any] = {}


def _start_worker(options: dict[str, Any], index: dict[str, Any] | None = None) -> None:
    """Worker initializer: warm the engine; with ``index`` (:func:`index_options`), open the index
    the items are checked against."""
    options = dict(options)
    options["title_patterns"] = [re.compile(p, f) for p, f in options.get("title_patterns") or ()]
    global _fingerprinter
    _fingerprinter = Fingerprinter(**options)
    _fingerprinter.fingerprint(*_SAMPLE)  # the first item pays nothing more than any other
    if index is not None:
        global _dedup
        _index.update(index)
        _dedup = Deduplicator.open(index["url"], fingerprinter=_fingerprinter, owner=index["owner"],
                                   **index["dedup"])
        expected = index.get("identity")
        if expected is not None and getattr(_dedup.index, "identity", None) != expected:
            location = _dedup.index.location
            _dedup.close()
            _dedup = None
            raise SimhashIndexError(f"index {location} is not the one this crawl opened (emptied and made again "
                                    "since): a worker refuses to check items against it")


def _fingerprint(title: Any, body: Any) -> tuple[Any, ...] | None:
    """The fields of an item's fingerprints, or None if fingerprinting raised (the crawl process
    then fingerprints the item itself, and raises the same error there)."""
    assert _fingerprinter is not None, "worker not started"
    try:
        fps = _fingerprinter.fingerprint(title, body)
    except Exception:
        return None
    return tuple(getattr(fps, name) for name in messages.FINGERPRINT_FIELDS)


def _fingerprint_many(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, ...] | None]:
    """:func:`_fingerprint` of each ``(title, body)`` of one call."""
    return [_fingerprint(title, body) for title, body in pairs]


def _check_many(items: list[tuple[Any, Any, str | None, str]],
                fates: tuple[list[int], list[int]] = ([], [])) -> tuple[int, list[Any], int | None]:
    """Write the ``fates`` (entry ids delivered and released downstream: a copy released meanwhile no
    longer blocks these items), then fingerprint and check-and-add each ``(title, body, url, request
    id)`` of one call, in one transaction (:func:`decide_with_retries`): how many times the index was
    retried, per item ``(fingerprint fields, verdict)``, ``(fields, the index's error)``, or None if
    fingerprinting raised (the crawl process then checks that item itself), and how many entries the
    fates released (None if they could not be written: the crawl process keeps them for later)."""
    assert _dedup is not None, "worker not started with an index"
    released = _write_fates(*fates)
    fps = [_fingerprint(title, body) for title, body, _, _ in items]
    decided = [(Fingerprints(*f), url, request_id) for f, (_, _, url, request_id) in zip(fps, items, strict=True)
               if f is not None]
    retries = 0

    def retrying(exc: BaseException, attempt: int, delay: float) -> None:
        nonlocal retries
        retries += len(decided)  # per item, as items see it
        logger.warning("scrapy-simhash: check-and-add failed (%s), retry %d of %d in %.2f s",
                       exc, attempt, _index["retries"], delay)

    try:
        verdicts: Iterator[Any] = iter(decide_with_retries(_dedup, decided, _index["retries"],
                                                           _index["retry_delay"], retrying))
    except Exception as exc:  # the index failed the batch (after its retries): each item says why
        verdicts = iter([exc] * len(decided))
    return retries, [None if f is None else (f, next(verdicts)) for f in fps], released


def _write_fates(delivered: list[int], released: list[int]) -> int | None:
    """Deliver and release these entries; how many were released, or None if the index failed."""
    assert _dedup is not None, "worker not started with an index"
    if not delivered and not released:
        return 0
    try:
        _dedup.index.deliver(delivered)
        return _dedup.index.release(released)
    except (SimhashIndexError, sqlite3.Error) as exc:
        logger.warning("scrapy-simhash: could not record what became of some items yet (%s); tried again with "
                       "the next ones", exc)
        return None


def decide_with_retries(dedup: Deduplicator, items: list[tuple[Fingerprints, str | None, str]], retries: int,
                        delay: float, retrying: Callable[[BaseException, int, float], Any]) -> list[Verdict]:
    """The check-and-add of ``(fingerprints, url, request id)`` items (one transaction), retried on
    index errors ``retries`` times, ``delay`` seconds apart and doubling (sleeping on this thread;
    ``retrying(error, attempt, delay)`` before each). Each item keeps its request id across the
    retries: an item added before the error gets its entry back, not itself as a duplicate."""
    pairs = [(fps, url) for fps, url, _ in items]
    request_ids = [request_id for *_, request_id in items]
    for attempt in range(retries + 1):
        try:
            return dedup.decide_many(pairs, request_ids=request_ids)
        except (SimhashIndexError, sqlite3.Error) as exc:
            if attempt == retries:
                raise
            retrying(exc, attempt + 1, delay)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def serve(conn: Connection, options: dict[str, Any], index: dict[str, Any] | None) -> None:
    """A :class:`~.fingerprints.FingerprintPool` worker's life: started (:func:`_start_worker`, after
    the pool's bootstrap: signals, exit with the parent), it says so on ``conn``, then answers each
    call read there (``(function, arguments)``) until the crawl process closes its end."""
    if hasattr(os, "sched_setscheduler"):  # woken by a call, never preempt the reactor that sent it
        with suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    try:
        bootstrap(_start_worker, (options, index))
    except BaseException as exc:  # the crawl process logs it, and this worker's death
        _tell(conn, "failed", f"{type(exc).__name__}: {exc}")
        exit_now()
    _tell(conn, "ready", os.getpid())
    while True:
        try:
            call, args = messages.read_call(conn.recv_bytes())
        except (EOFError, OSError):
            break
        try:
            answer = ("answer", call(*args))
        except Exception as exc:  # each item of the call is checked in the crawl process, and raises there
            answer = ("raised", f"{type(exc).__name__}: {exc}")
        _tell(conn, *answer)
    exit_now()


def _tell(conn: Connection, kind: str, value: Any) -> None:
    """Send one message to the crawl process; exit if it closed its end (nobody is left to answer)."""
    try:
        data = messages.answer(kind, value)
    except TypeError as exc:  # a value no message may hold: the crawl process checks the call's items itself
        data = messages.answer("raised", str(exc))
    try:
        conn.send_bytes(data)
    except OSError:
        exit_now()
