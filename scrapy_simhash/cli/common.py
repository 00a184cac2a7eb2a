"""What the subcommands share: the error they exit with, opening the index, the engine and outputs,
picking fields of an item, and printing dates, fingerprints and entries."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..settings import BY_FLAG
from ..timefmt import iso

if TYPE_CHECKING:
    from ..engine import Deduplicator
    from ..fingerprint.fingerprinter import Fingerprinter
    from ..index import BandIndex, Entry

PROG = "scrapy-simhash"
GZIP_MAGIC = b"\x1f\x8b"
#: Bad lines ``dedup`` gives an error decision line in --decisions before the rest are only counted:
#: a flood of tiny bad lines (``x``, repeated in a gzip file) would write a hundred times its size
#: (docs/decisions/0600-cli-bounded-output.md).
MAX_ERROR_DECISIONS = 1000


class CliError(Exception):
    """A failure reported as one line on stderr with an exit status (no traceback)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def describe(exc: BaseException) -> str:
    """An exception as one line, naming the file of an OSError."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{text}: {exc.filename}"
    return text


# ------------------------------------------------------------------------------------------------
# Opening the index and the engine
# ------------------------------------------------------------------------------------------------


#: Deduplicator.open keywords that go to the Fingerprinter.
FINGERPRINTER_KEYWORDS = ("bits", "top_k", "stop_words", "user_dict", "title_patterns", "main_content", "max_share")


def engine_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """:meth:`~scrapy_simhash.Deduplicator.open` keyword → value of the setting options ``args`` has
    (the settings table names the keyword of each option), as the pipeline's
    :func:`~scrapy_simhash.settings.engine_options` gives them from the settings."""
    return {s.engine: getattr(args, dest) for dest, s in BY_FLAG.items() if s.engine and hasattr(args, dest)}


def index_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """``index_options`` of :meth:`~scrapy_simhash.Deduplicator.open` (and keywords of
    :func:`~scrapy_simhash.index.open_index`) the setting options ``args`` has give."""
    return {s.index_option: getattr(args, dest) for dest, s in BY_FLAG.items()
            if s.index_option and hasattr(args, dest)}


def fingerprinter_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~scrapy_simhash.Fingerprinter` keyword arguments the options describe."""
    keywords = engine_keywords(args)
    options = {k: keywords[k] for k in FINGERPRINTER_KEYWORDS}
    options["title_patterns"] = tuple(options["title_patterns"] or ())
    return options


def make_fingerprinter(options: Mapping[str, Any]) -> Fingerprinter:
    """A Fingerprinter (jieba is loaded here, on first use, not when the command line starts)."""
    from ..fingerprint.fingerprinter import Fingerprinter

    return Fingerprinter(**options)


def open_dedup(
    args: argparse.Namespace, fingerprinter: Fingerprinter, *, reset: bool = False, readonly: bool = False,
    owner: str | None = None,
) -> Deduplicator:
    """The Deduplicator the options describe. Writable: opened like the pipeline opens it (the index
    must have been built for these thresholds). Read-only (``check``): the index as recorded, and any
    thresholds it can answer."""
    from ..engine import Deduplicator

    keywords = engine_keywords(args)
    thresholds = {k: keywords.pop(k) for k in ("title_max_distance", "body_max_distance", "dynamic_threshold")}
    options = {k: v for k, v in keywords.items() if k not in (*FINGERPRINTER_KEYWORDS, "namespace")}
    options["owner"] = owner
    if readonly:
        index = open_index_for(args, readonly=True)
        try:
            return Deduplicator(index, fingerprinter, **thresholds, **options)
        except Exception as exc:
            index.close()
            raise CliError(f"cannot use index {shown(args.index)}: {describe(exc)}") from exc
    try:
        return Deduplicator.open(
            args.index, namespace=args.namespace, bits=args.bits, reset=reset, fingerprinter=fingerprinter,
            index_options=index_keywords(args), **thresholds, **options,
        )
    except Exception as exc:  # any failure to open is one line and status 2
        raise CliError(f"cannot open index {shown(args.index)}: {describe(exc)}") from exc


def shown(location: str) -> str:
    """An index location as messages show it: a Redis URL without its password (a path or a SQLite URL
    as given: re-assembling ``sqlite:////abs/path`` would lose a slash)."""
    from ..index.redis.client import redacted

    text = str(location)
    return redacted(text) if "://" in text and not text.lower().startswith("sqlite:") else text


def open_index_for(args: argparse.Namespace, readonly: bool = False) -> BandIndex:
    """The index ``--index`` names, with the parameters it was built with (no fingerprinter: jieba
    is not loaded)."""
    from ..index import open_index

    try:
        return open_index(args.index, namespace=args.namespace, readonly=readonly, **index_keywords(args))
    except Exception as exc:
        raise CliError(f"cannot open index {shown(args.index)}: {describe(exc)}") from exc


# ------------------------------------------------------------------------------------------------
# Items, outputs
# ------------------------------------------------------------------------------------------------


def pick(item: Mapping[str, Any], names: Sequence[str]) -> tuple[str | None, Any]:
    """The first field of ``names`` holding a non-empty value; else the first present one; else None."""
    present = None
    for name in names:
        if name in item:
            value = item[name]
            if value not in (None, "", [], {}):
                return name, value
            if present is None:
                present = name
    return present, (item[present] if present is not None else None)


def json_type(value: Any) -> str:
    """What a JSON value is, for messages ("an object", "null" …)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def open_output(name: str) -> IO[str]:
    """A text output: '-' is stdout, a name ending in .gz is gzip-compressed."""
    if name == "-":
        return sys.stdout
    try:
        if name.endswith(".gz"):
            return gzip.open(name, "wt", encoding="utf-8")
        return open(name, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {name}: {exc.strerror or exc}") from exc


def sync_output(stream: IO[str]) -> None:
    """Make what was written to ``stream`` so far survive a kill: flush it (a gzip output ends a
    deflate block, so the file read so far decompresses) and fsync its file (not a pipe)."""
    stream.flush()
    target: Any = getattr(stream, "buffer", stream)
    if isinstance(target, gzip.GzipFile):
        target.flush(zlib.Z_SYNC_FLUSH)
        target = target.fileobj
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        os.fsync(target.fileno())


class closing_output:
    """Close an output on exit unless it is stdout (flushed instead)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __enter__(self) -> IO[str]:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is sys.stdout:
            self.stream.flush()
        else:
            self.stream.close()


def silence_stdout() -> None:
    """After a broken pipe, point stdout at devnull so the interpreter's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def hex_fp(fp: int | None) -> str | None:
    """A fingerprint as hex (JSON numbers lose precision beyond 53 bits)."""
    return None if fp is None else f"{fp:x}"


class Damage:
    """The rows of the index a command skipped as damaged (values scrapy-simhash never writes,
    :mod:`scrapy_simhash.index.damage`): passed as the ``damaged`` callback of ``entries()`` and
    ``decisions()``, it counts them and keeps the first one's description for :meth:`warn`."""

    def __init__(self) -> None:
        self.count = 0
        self.first: str | None = None

    def __call__(self, problem: str) -> None:
        self.count += 1
        if self.first is None:
            self.first = problem

    def warn(self, command: str, location: str) -> None:
        """One line on stderr when rows were skipped: how many, and the first."""
        if self.count:
            rows = "row" if self.count == 1 else "rows"
            print(f"{PROG} {command}: skipped {self.count:,} damaged {rows} of index {shown(location)} (values "
                  f"scrapy-simhash never writes); the first: {self.first}", file=sys.stderr)


def entry_dict(entry: Entry) -> dict[str, Any]:
    """An index entry as JSON-ready data (``export``, ``check --json``, ``explain --json``)."""
    return {"id": entry.id, "namespace": entry.namespace, "url": entry.url, "title": entry.title,
            "first_seen": iso(entry.first_seen), "first_seen_ts": entry.first_seen,
            "title_fp": hex_fp(entry.title_fp), "body_fp": hex_fp(entry.body_fp)}
