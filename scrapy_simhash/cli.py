"""``scrapy-simhash``: dedup a JSONL export and inspect or maintain the index, without writing Python.

The same parser and implementation serve ``scrapy simhash …`` inside a Scrapy project
(:mod:`scrapy_simhash.commands`), which only changes the option defaults (``--index`` and the
tier options come from the project's ``SIMHASH_*`` settings).

Subcommands: ``dedup`` (JSONL in → kept items and one decision per line out) and ``import`` (warm an
index, summary only), both in :mod:`.batch`; ``check`` (verdict for one item without adding it, plus its nearest
entries), ``explain`` (why a URL was dropped), ``stats``, ``export``, ``purge``, ``reset``,
``forget`` and ``report`` (a self-contained HTML page about the thresholds).

Exit status: 0 on success (bad input lines are reported, counted and skipped, they do not fail a
run); 1 when ``explain``/``forget`` find nothing, or when the input or the index broke off in the
middle of a run; 2 when the run cannot start (bad usage, unreadable input, an index that cannot be
opened). Errors are one line on stderr, never a traceback.

The standard library only (argparse, gzip, multiprocessing): the command line must start fast and
add no dependency to a Scrapy project.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import defaults as D
from .__version__ import __version__

if TYPE_CHECKING:
    from .dedup import Deduplicator, Verdict
    from .fingerprint import Fingerprinter
    from .index.base import BandIndex, Entry, Match

PROG = "scrapy-simhash"
_GZIP_MAGIC = b"\x1f\x8b"


class CliError(Exception):
    """A failure reported as one line on stderr with an exit status (no traceback)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


# ------------------------------------------------------------------------------------------------
# Option defaults (built-in, or from a Scrapy project's settings)
# ------------------------------------------------------------------------------------------------

#: Option dest → built-in default. ``scrapy simhash`` replaces these with the project's settings.
BUILTIN_DEFAULTS: dict[str, Any] = {
    "index": None,
    "namespace": D.NAMESPACE,
    "title_field": D.TITLE_FIELD,
    "body_field": ",".join(D.BODY_FIELD) if isinstance(D.BODY_FIELD, list) else D.BODY_FIELD,
    "url_field": D.URL_FIELD,
    "title_max_distance": D.TITLE_MAX_DISTANCE,
    "body_max_distance": D.BODY_MAX_DISTANCE,
    "title_action": D.TITLE_ACTION,
    "body_action": D.BODY_ACTION,
    "ttl_days": D.TTL_DAYS,
    "bits": D.BITS,
    "top_k": D.TOP_K,
    "dynamic_threshold": D.DYNAMIC_THRESHOLD,
    "stop_words": D.STOP_WORDS,
    "user_dict": D.USER_DICT,
    "main_content": D.MAIN_CONTENT,
    "title_numbers": D.TITLE_NUMBERS,
    "sentences_shared": D.SENTENCES_SHARED,
    "title_pattern": list(D.TITLE_PATTERNS),
}


# ------------------------------------------------------------------------------------------------
# The parser
# ------------------------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps the examples' line breaks and shows defaults."""


def _csv_fields(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected one or more field names, comma-separated")
    return names


def _non_negative_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {n}")
    return n


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {n}")
    return n


def _positive_float(value: str) -> float:
    x = float(value)
    if not x > 0 or math.isinf(x):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {value}")
    return x


def _fields_default(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def build_parser(prog: str = PROG, defaults: Mapping[str, Any] | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``defaults`` (option dest → value) replace the built-in defaults."""
    d = {**BUILTIN_DEFAULTS, **(defaults or {})}
    in_project = defaults is not None and d.get("index") is not None

    parser = argparse.ArgumentParser(
        prog=prog,
        formatter_class=_Formatter,
        description="Near-duplicate (repost) detection for news items with simhash: dedup JSON-lines "
        "exports and inspect or maintain the index the Scrapy pipeline uses.",
        epilog=f"examples:\n  {prog} dedup items.jsonl.gz --index index.sqlite3 -o kept.jsonl "
        f"--decisions decisions.jsonl\n  {prog} stats --index index.sqlite3\n"
        f"  {prog} check --index index.sqlite3 --title '…' --body '…'\n"
        f"run '{prog} SUBCOMMAND --help' for the options of each subcommand.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)

    def add(name: str, help_: str, description: str, examples: Sequence[str]) -> argparse.ArgumentParser:
        lines = "\n".join(f"  {prog} {name} {e}" for e in examples)
        return sub.add_parser(
            name, help=help_, description=description, formatter_class=_Formatter,
            epilog=f"examples:\n{lines}",
        )

    def index_options(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("index")
        help_index = "index file path or URL (sqlite:///path, redis://host:6379/0)"
        if in_project:
            help_index += "; default: the project's SIMHASH_INDEX_URL or .scrapy/simhash/index.sqlite3"
            g.add_argument("--index", default=d["index"], metavar="PATH_OR_URL", help=help_index)
        else:
            g.add_argument("--index", required=True, metavar="PATH_OR_URL", help=help_index)
        g.add_argument("--namespace", default=d["namespace"], help="index namespace (SIMHASH_NAMESPACE)")

    def field_options(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("fields (comma-separated candidates: the first present, non-empty one is used)")
        g.add_argument("--title-field", type=_csv_fields, default=_fields_default(d["title_field"]),
                       metavar="NAMES", help="title field(s)")
        g.add_argument("--body-field", type=_csv_fields, default=_fields_default(d["body_field"]),
                       metavar="NAMES", help="body field(s), HTML or text or a list of paragraphs")
        g.add_argument("--url-field", type=_csv_fields, default=_fields_default(d["url_field"]),
                       metavar="NAMES", help="URL field(s)")

    def tier_options(p: argparse.ArgumentParser, actions: bool = True) -> None:
        g = p.add_argument_group("tiers and fingerprints (as the pipeline's SIMHASH_* settings)")
        g.add_argument("--title-max-distance", type=_non_negative_int, default=d["title_max_distance"],
                       metavar="BITS", help="title within this many bits → duplicate")
        g.add_argument("--body-max-distance", type=_non_negative_int, default=d["body_max_distance"],
                       metavar="BITS", help="else body within this many bits → duplicate")
        if actions:
            g.add_argument("--title-action", choices=("drop", "flag"), default=d["title_action"],
                           help="what a title-tier match does (flag: keep it, status 'flagged')")
            g.add_argument("--body-action", choices=("drop", "flag"), default=d["body_action"],
                           help="what a body-tier match does")
        g.add_argument("--ttl-days", type=_positive_float, default=d["ttl_days"], metavar="DAYS",
                       help="entries older than this never match (default: they never expire)")
        g.add_argument("--dynamic-threshold", action=argparse.BooleanOptionalAction,
                       default=bool(d["dynamic_threshold"]),
                       help="body threshold by length: +2 bits under 100 chars, -1 over 2000")
        g.add_argument("--bits", type=int, choices=(32, 64, 128), default=d["bits"], help="fingerprint size")
        g.add_argument("--top-k", type=_positive_int, default=d["top_k"], metavar="K",
                       help="features kept per body")
        g.add_argument("--stop-words", default=d["stop_words"], metavar="FILE",
                       help="extra stop words, one per line")
        g.add_argument("--user-dict", default=d["user_dict"], metavar="FILE", help="jieba user dictionary")
        g.add_argument("--title-pattern", action="append", default=list(d["title_pattern"] or []),
                       metavar="REGEX", help="extra title suffix to remove (repeatable)")
        g.add_argument("--main-content", action=argparse.BooleanOptionalAction, default=bool(d["main_content"]),
                       help="drop page boilerplate from HTML bodies before fingerprinting")
        g.add_argument("--title-numbers", type=_non_negative_int, default=d["title_numbers"], metavar="PCT",
                       help="a title match counts only if the bodies' numbers overlap this much (0: off)")
        g.add_argument("--sentences-shared", type=_non_negative_int, default=d["sentences_shared"], metavar="PCT",
                       help="opt-in sentence tier: more than PCT %% of an earlier story's sampled sentences "
                            "here → duplicate (50 recommended; 0: off)")

    def json_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    # dedup
    p = add("dedup", "dedup a JSON-lines file against the index (adding new items)",
            "Read JSON lines (one item per line; '-' for stdin; gzip accepted), check each item in input "
            "order against the index (title tier, else body tier) and add the new ones. Kept items (new and "
            "flagged) go to -o, one decision per input line to --decisions. Bad lines are reported with "
            "their line number, counted and skipped.\n\ndecision record: {\"line\": 1-based, \"url\", \"status\": "
            "new|duplicate|flagged|skipped|error, \"tier\": title|body|null, \"distance\": int|null, "
            "\"original\": URL of the matched item|null, \"error\": message|null} (for 'skipped', the reason)",
            ["items.jsonl --index index.sqlite3 -o kept.jsonl --decisions decisions.jsonl",
             "export.jsonl.gz --index sqlite:///data/index.sqlite3 --jobs 2 -o kept.jsonl.gz",
             "- --index index.sqlite3 --body-field content,text -o - < items.jsonl > kept.jsonl",
             "items.jsonl --index index.sqlite3 --body-action flag --decisions - | grep flagged"])
    p.add_argument("input", metavar="INPUT", help="JSON lines file ('-' for stdin, .gz accepted)")
    p.add_argument("-o", "--output", metavar="KEPT", help="write kept items here (.gz compresses, '-' stdout)")
    p.add_argument("--decisions", metavar="FILE", help="write one decision per input line here (.gz, '-')")
    _run_options(p)
    index_options(p)
    field_options(p)
    tier_options(p)

    # import
    p = add("import", "warm the index from an existing JSON-lines corpus (summary only)",
            "Like dedup, without outputs: every new item is added to the index; the summary says how many "
            "were duplicates of each other or of what the index already held.",
            ["corpus.jsonl.gz --index index.sqlite3", "old-crawl.jsonl --index index.sqlite3 --jobs 2 --reset"])
    p.add_argument("input", metavar="INPUT", help="JSON lines file ('-' for stdin, .gz accepted)")
    _run_options(p)
    index_options(p)
    field_options(p)
    tier_options(p)

    # check
    p = add("check", "verdict for one item WITHOUT adding it, and its nearest entries",
            "Fingerprint one item and look it up (nothing is written): the verdict dedup would give, then the "
            "nearest entries of each tier up to the largest distance the index answers, with the features "
            "they share. The index stores short titles, not bodies: shared features of stored entries are "
            "their title words.",
            ["--index index.sqlite3 --title '台风登陆广东' --body '…'",
             "--index index.sqlite3 --item '{\"title\": \"…\", \"body\": \"…\"}' --json",
             "--index index.sqlite3 --item-file item.json"])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--title", help="the item's title (with --body)")
    src.add_argument("--item", metavar="JSON", help="the item as one JSON object")
    src.add_argument("--item-file", metavar="FILE", help="a file holding one JSON object ('-' for stdin)")
    p.add_argument("--body", help="the item's body (with --title)")
    p.add_argument("--limit", type=_positive_int, default=5, help="nearest entries shown per tier")
    json_option(p)
    index_options(p)
    field_options(p)
    tier_options(p)

    # explain
    p = add("explain", "why an earlier item was dropped (the stored decision)",
            "Print the stored decision about URL: status, tier, distance and the original it matched; or "
            "that the URL was admitted as a new entry. Exit status 1 when the index knows nothing of it.",
            ["https://example.com/news/1.html --index index.sqlite3",
             "https://example.com/news/1.html --index index.sqlite3 --json"])
    p.add_argument("url", metavar="URL")
    json_option(p)
    index_options(p)

    # stats
    p = add("stats", "entries per namespace, parameters, file size, oldest/newest",
            "Print what the index holds and how it was built.",
            ["--index index.sqlite3", "--index redis://localhost:6379/0 --json"])
    json_option(p)
    index_options(p)

    # export
    p = add("export", "entries as JSON lines",
            "Write every entry of the namespace, oldest first: id, namespace, url, title, first_seen (ISO "
            "8601 UTC), first_seen_ts (POSIX seconds), title_fp and body_fp (hex strings: JSON numbers lose "
            "precision beyond 53 bits).",
            ["--index index.sqlite3 > entries.jsonl", "--index index.sqlite3 -o entries.jsonl.gz"])
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="output file (.gz compresses, '-' stdout)")
    index_options(p)

    # purge
    p = add("purge", "remove entries first seen more than DAYS ago",
            "Remove old entries (and let their stories be admitted again).",
            ["--older-than 30 --index index.sqlite3", "--older-than 0.5 --index index.sqlite3"])
    p.add_argument("--older-than", type=_positive_float, required=True, metavar="DAYS")
    index_options(p)

    # reset
    p = add("reset", "remove every entry and decision of the namespace",
            "Empty the namespace. Asks for confirmation on a terminal; without a terminal it refuses unless "
            "--yes is given.",
            ["--index index.sqlite3", "--index index.sqlite3 --namespace test --yes"])
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    index_options(p)

    # forget
    p = add("forget", "remove one entry, by id or URL",
            "Remove the entry with this id (a number, as export shows) or URL, so its story is admitted "
            "again. Exit status 1 when there is no such entry.",
            ["https://example.com/news/1.html --index index.sqlite3", "42 --index index.sqlite3"])
    p.add_argument("key", metavar="ID_OR_URL")
    index_options(p)

    # report
    p = add("report", "self-contained HTML page: distance histograms and closest pairs per tier",
            "Write one HTML page (inline CSS and SVG, no scripts, no external resources) showing, per tier, "
            "the distance histogram of recent decisions and of the recent entries' nearest neighbours, and "
            "the closest pairs on both sides of the threshold, so you can see whether the thresholds suit "
            "your sites.",
            ["-o report.html --index index.sqlite3",
             "-o report.html --index index.sqlite3 --recent 2000 --decisions decisions.jsonl"])
    p.add_argument("-o", "--output", required=True, metavar="HTML")
    p.add_argument("--recent", type=_positive_int, default=1000, metavar="N",
                   help="recent entries/decisions examined")
    p.add_argument("--pairs", type=_positive_int, default=8, metavar="N", help="pairs shown per side and tier")
    p.add_argument("--decisions", action="append", default=[], metavar="FILE",
                   help="also read decisions of dedup runs from this file (repeatable)")
    g = p.add_argument_group("thresholds shown (default: the index's or the settings')")
    g.add_argument("--title-max-distance", type=_non_negative_int, default=d["title_max_distance"],
                   metavar="BITS")
    g.add_argument("--body-max-distance", type=_non_negative_int, default=d["body_max_distance"],
                   metavar="BITS")
    index_options(p)
    return parser


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", "-j", type=_positive_int, default=1, metavar="N",
                   help="fingerprint on N processes (decisions stay in input order, identical to --jobs 1)")
    p.add_argument("--reset", action="store_true", help="empty the namespace first")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-line error reports, summary only")


# ------------------------------------------------------------------------------------------------
# Opening things
# ------------------------------------------------------------------------------------------------


def _fingerprinter_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bits": args.bits,
        "top_k": args.top_k,
        "stop_words": args.stop_words,
        "user_dict": args.user_dict,
        "title_patterns": tuple(args.title_pattern or ()),
        "main_content": bool(args.main_content),
        "sentences": bool(getattr(args, "sentences_shared", 0)),
    }


def _make_fingerprinter(options: Mapping[str, Any]) -> Fingerprinter:
    from .fingerprint import Fingerprinter

    return Fingerprinter(**options)


def _open_dedup(
    args: argparse.Namespace, fingerprinter: Fingerprinter, *, reset: bool = False, readonly: bool = False
) -> Deduplicator:
    """The Deduplicator the options describe. Writable: opened like the pipeline opens it (the index
    must have been built for these thresholds). Read-only (``check``): the index as recorded, and any
    thresholds it can answer."""
    from .dedup import Deduplicator

    options: dict[str, Any] = {"ttl_days": args.ttl_days, "title_numbers": args.title_numbers,
                               "sentences_shared": args.sentences_shared}
    if hasattr(args, "title_action"):
        options.update(title_action=args.title_action, body_action=args.body_action)
    thresholds = {"title_max_distance": args.title_max_distance, "body_max_distance": args.body_max_distance,
                  "dynamic_threshold": args.dynamic_threshold}
    if readonly:
        index = _open_index(args, readonly=True)
        try:
            return Deduplicator(index, fingerprinter, **thresholds, **options)
        except Exception as exc:
            index.close()
            raise CliError(f"cannot use index {args.index}: {_describe(exc)}") from exc
    try:
        return Deduplicator.open(
            args.index, namespace=args.namespace, bits=args.bits, reset=reset, fingerprinter=fingerprinter,
            **thresholds, **options,
        )
    except Exception as exc:  # any failure to open is one line and status 2
        raise CliError(f"cannot open index {args.index}: {_describe(exc)}") from exc


def _open_index(args: argparse.Namespace, readonly: bool = False) -> BandIndex:
    """The index with the parameters it was built with (no fingerprinter: jieba is not loaded)."""
    from .index import open_index

    try:
        return open_index(args.index, namespace=args.namespace, readonly=readonly)
    except Exception as exc:
        raise CliError(f"cannot open index {args.index}: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{text}: {exc.filename}"
    return text


def _open_output(name: str) -> IO[str]:
    """A text output: '-' is stdout, a name ending in .gz is gzip-compressed."""
    if name == "-":
        return sys.stdout
    try:
        if name.endswith(".gz"):
            return gzip.open(name, "wt", encoding="utf-8")
        return open(name, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {name}: {exc.strerror or exc}") from exc


# ------------------------------------------------------------------------------------------------
# dedup / import: reading lines, fingerprinting (maybe on workers), deciding in order
# ------------------------------------------------------------------------------------------------


def _pick(item: Mapping[str, Any], names: Sequence[str]) -> tuple[str | None, Any]:
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


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


class _closing:
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


def _silence_stdout() -> None:
    # After a broken pipe, point stdout at devnull so the interpreter's final flush stays quiet.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _check_item(args: argparse.Namespace) -> tuple[Any, Any, str | None]:
    if args.title is not None:
        return args.title, args.body, None
    if args.body is not None:
        raise CliError("--body goes with --title")
    if args.item is not None:
        text, where = args.item, "--item"
    else:
        where = args.item_file
        try:
            if args.item_file == "-":
                text = sys.stdin.read()
            else:
                raw = Path(args.item_file).read_bytes()
                text = (gzip.decompress(raw) if raw[:2] == _GZIP_MAGIC else raw).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise CliError(f"cannot read {args.item_file}: {_describe(exc)}") from exc
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where} is not JSON: {exc}") from exc
    if not isinstance(item, dict):
        raise CliError(f"{where} must be a JSON object, not {_json_type(item)}")
    _, title = _pick(item, args.title_field)
    _, body = _pick(item, args.body_field)
    _, url = _pick(item, args.url_field)
    if title is None and body is None:
        raise CliError(f"{where} has no title or body field (looked for "
                       f"{', '.join([*args.title_field, *args.body_field])})")
    return title, body, url if isinstance(url, str) else None


def run_check(args: argparse.Namespace) -> int:
    """Verdict without adding, then the nearest entries per tier and what they share."""
    title, body, url = _check_item(args)
    try:
        fingerprinter = _make_fingerprinter(_fingerprinter_options(args))
    except (OSError, ValueError) as exc:
        raise CliError(_describe(exc)) from exc
    dedup = _open_dedup(args, fingerprinter, readonly=True)
    try:
        try:
            fps = dedup.fingerprint(title, body)
        except (TypeError, ValueError) as exc:
            raise CliError(f"cannot fingerprint this item: {exc}") from exc
        index = dedup.index
        now = time.time()
        not_before = None if dedup.ttl_days is None else now - dedup.ttl_days * 86400
        body_k = dedup.body_distance_for(fps.body_chars)
        verdict = dedup.peek(fps, url=url, now=now)  # the rule dedup runs, without the insert
        params = index.params
        near: list[Match] = []
        if fps.usable:
            near = index.lookup(fps.title, fps.body, title_k=params.max_title_distance,
                                body_k=params.max_body_distance, not_before=not_before,
                                limit=args.limit)
        features = fingerprinter.features
        title_features = features.title_features(fps.title_text) if fps.title_text else {}
        body_text = fingerprinter.clean_body(body) if fps.body is not None else ""
        body_features = features.body_features(body_text) if body_text else {}
        neighbours = []
        for match in near:
            stored_words = set(features.words(match.entry.title or ""))
            shared = [w for w in title_features if w in stored_words]
            neighbours.append({
                "tier": match.tier, "distance": match.distance,
                "within_threshold": match.distance <= (dedup.title_max_distance if match.tier == "title"
                                                       else body_k),
                "entry": _entry_dict(match.entry), "shared_title_words": shared,
            })
        report = {
            "url": url,
            "verdict": verdict.as_dict(),
            "thresholds": {"title": dedup.title_max_distance, "body": body_k},
            "index_answers_up_to": {"title": params.max_title_distance, "body": params.max_body_distance},
            "query": {
                "title": fps.title_text, "body_chars": fps.body_chars,
                "title_fp": _hex(fps.title), "body_fp": _hex(fps.body),
                "title_features": _rounded(title_features),
                "body_features": _rounded(dict(sorted(body_features.items(), key=lambda kv: -kv[1]))),
            },
            "nearest": neighbours,
            "note": "the index stores fingerprints and short titles, not bodies: shared features of "
                    "stored entries are their title words",
        }
    finally:
        dedup.close()
    if args.json:
        _print_json(report)
        return 0
    _print_check(report, verdict)
    return 0


def _print_check(report: Mapping[str, Any], verdict: Verdict) -> None:
    q = report["query"]
    detail = f" ({verdict.summary()})" if verdict.status in ("duplicate", "flagged", "skipped") else ""
    print(f"verdict: {verdict.status}{detail}" + ("  (nothing was added)" if verdict.status != "skipped" else ""))
    if verdict.original is not None:
        o = verdict.original
        print(f"  original: entry #{o.id}, first seen {_iso(o.first_seen)}, {o.url or '(no URL)'}")
        print(f"            {o.title or '(no title stored)'}")
    print(f"query title: {q['title'] or '(none)'}")
    print(f"  title fp {q['title_fp'] or '(too little text)'}, body fp {q['body_fp'] or '(too little text)'}, "
          f"body {q['body_chars']:,} chars")
    print(f"  title features: {_features_line(q['title_features'])}")
    top = dict(list(q["body_features"].items())[:12])
    print(f"  body features (top {len(top)} of {len(q['body_features'])}): {_features_line(top)}")
    for tier in ("title", "body"):
        rows = [n for n in report["nearest"] if n["tier"] == tier]
        print(f"nearest by {tier} (threshold {report['thresholds'][tier]} bits; the index answers up to "
              f"{report['index_answers_up_to'][tier]}):")
        if not rows:
            print("  none within reach")
        for n in rows:
            e = n["entry"]
            mark = "≤" if n["within_threshold"] else ">"
            print(f"  distance {n['distance']} ({mark} threshold)  entry #{e['id']}  {e['first_seen']}  "
                  f"{e['url'] or '(no URL)'}")
            print(f"      {e['title'] or '(no title stored)'}")
            print(f"      shared title words: {' '.join(n['shared_title_words']) or '(none)'}")
    print(f"note: {report['note']}")


def _features_line(features: Mapping[str, float]) -> str:
    return " ".join(f"{w}({v:g})" for w, v in features.items()) or "(none)"


def _rounded(features: Mapping[str, float]) -> dict[str, float]:
    return {w: round(v, 2) for w, v in features.items()}


def _hex(fp: int | None) -> str | None:
    return None if fp is None else f"{fp:x}"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry_dict(entry: Entry) -> dict[str, Any]:
    return {"id": entry.id, "namespace": entry.namespace, "url": entry.url, "title": entry.title,
            "first_seen": _iso(entry.first_seen), "first_seen_ts": entry.first_seen,
            "title_fp": _hex(entry.title_fp), "body_fp": _hex(entry.body_fp)}


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


# ------------------------------------------------------------------------------------------------
# explain, stats, export, purge, reset, forget
# ------------------------------------------------------------------------------------------------


def run_explain(args: argparse.Namespace) -> int:
    index = _open_index(args, readonly=True)
    try:
        decision = index.explain(args.url)
        entry = None
        if decision is None:
            entry = next((e for e in index.entries() if e.url == args.url), None)
    finally:
        index.close()
    if decision is not None:
        data: dict[str, Any] = {
            "url": decision.url, "status": decision.status, "tier": decision.tier,
            "distance": decision.distance, "decided_at": _iso(decision.decided_at),
            "original": _entry_dict(decision.original) if decision.original is not None else None,
        }
    elif entry is not None:
        data = {"url": args.url, "status": "new", "entry": _entry_dict(entry)}
    else:
        data = {"url": args.url, "status": None}
    if args.json:
        _print_json(data)
    elif decision is not None:
        verb = "dropped as a duplicate" if decision.status == "duplicate" else f"kept but {decision.status}"
        print(f"{args.url}\n  {verb} on {data['decided_at']}: {decision.tier} tier, distance {decision.distance}")
        o = decision.original
        if o is None:
            print("  original: no longer in the index (purged or forgotten)")
        else:
            print(f"  original: entry #{o.id}, first seen {_iso(o.first_seen)}, {o.url or '(no URL)'}")
            print(f"            {o.title or '(no title stored)'}")
    elif entry is not None:
        print(f"{args.url}\n  admitted as new: entry #{entry.id}, first seen {_iso(entry.first_seen)}")
        print(f"  {entry.title or '(no title stored)'}")
    else:
        print(f"{args.url}: no decision and no entry for this URL in namespace {args.namespace!r}",
              file=sys.stderr)
        return 1
    return 0


def index_stats(index: BandIndex) -> dict[str, Any]:
    """``index.stats()``, completed with what every index can say (location, count, parameters)."""
    data = dict(index.stats())
    data.setdefault("location", index.location)
    data.setdefault("namespace", index.namespace)
    data.setdefault("params", index.params.as_dict())
    data.setdefault("entries", index.count())
    return data


_TIME_KEYS = ("oldest", "newest", "created", "decided_at", "first_seen")


def run_stats(args: argparse.Namespace) -> int:
    index = _open_index(args, readonly=True)
    try:
        data = index_stats(index)
    finally:
        index.close()
    if args.json:
        _print_json(data)
        return 0
    p = data.get("params") or {}
    size = data.get("file_size")
    print(f"index      {data['location']}" + (f"  ({_human_bytes(size)}, {size:,} bytes)" if size else ""))
    if data.get("backend") or data.get("format"):
        print(f"format     {data.get('backend', '?')} {data.get('format') or ''} schema "
              f"{data.get('schema_version', '?')}, created {_iso_any(data.get('created'))}"
              + (f" by {data['created_by']}" if data.get("created_by") else ""))
    if p:
        print(f"parameters {p.get('bits')}-bit fingerprints; title: {p.get('title_bands')} bands → answers "
              f"distances up to {int(p.get('title_bands', 1)) - 1}; body: {p.get('body_bands')} bands → up to "
              f"{int(p.get('body_bands', 1)) - 1}; tokenizer {p.get('tokenizer')}, features v"
              f"{p.get('features_version')}")
    namespaces = data.get("namespaces") or {data["namespace"]: {k: data.get(k) for k in
                                                                ("entries", "oldest", "newest", "decisions")}}
    print("namespaces:")
    for name, ns in namespaces.items():
        mark = "*" if name == data["namespace"] else " "
        print(f" {mark} {name!r:<16} {ns.get('entries') or 0:>10,} entries  {ns.get('decisions') or 0:>9,} "
              f"decisions  oldest {_iso_any(ns.get('oldest'))}  newest {_iso_any(ns.get('newest'))}")
    shown = {"location", "file_size", "backend", "format", "schema_version", "created", "created_by", "params",
             "namespaces", "namespace", "entries", "oldest", "newest", "decisions"}
    for key, value in data.items():
        if key not in shown:
            print(f"{key:<10} {_iso_any(value) if key in _TIME_KEYS else value}")
    return 0


def _iso_any(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _iso(float(value)) or "-"
    return "-" if value is None else str(value)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def run_export(args: argparse.Namespace) -> int:
    index = _open_index(args, readonly=True)
    n = 0
    try:
        with _closing(_open_output(args.output)) as out:
            for entry in index.entries():
                out.write(json.dumps(_entry_dict(entry), ensure_ascii=False) + "\n")
                n += 1
    except BrokenPipeError:
        _silence_stdout()
        return 1
    finally:
        index.close()
    print(f"exported {n:,} entries of namespace {args.namespace!r}", file=sys.stderr)
    return 0


def run_purge(args: argparse.Namespace) -> int:
    index = _open_index(args)
    try:
        cutoff = time.time() - args.older_than * 86400
        gone = index.purge(cutoff)
        left = index.count()
    finally:
        index.close()
    print(f"purged {gone:,} entries first seen before {_iso(cutoff)} ({args.older_than:g} days ago); "
          f"{left:,} left in namespace {args.namespace!r}")
    return 0


def run_reset(args: argparse.Namespace) -> int:
    index = _open_index(args)
    try:
        count = index.count()
        if not args.yes:
            if not sys.stdin.isatty():
                raise CliError("refusing to reset without --yes when stdin is not a terminal")
            answer = input(f"Remove all {count:,} entries and decisions of namespace {args.namespace!r} in "
                           f"{index.location}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing removed")
                return 1
        gone = index.reset()
    finally:
        index.close()
    print(f"reset namespace {args.namespace!r}: {gone:,} entries removed")
    return 0


def run_forget(args: argparse.Namespace) -> int:
    key: int | str = int(args.key) if args.key.isdigit() else args.key
    index = _open_index(args)
    try:
        gone = index.forget(key)
    finally:
        index.close()
    what = f"entry #{key}" if isinstance(key, int) else key
    if not gone:
        missing = what if isinstance(key, int) else f"entry with URL {key}"
        print(f"no {missing} in namespace {args.namespace!r}", file=sys.stderr)
        return 1
    print(f"forgot {what} ({gone} entr{'y' if gone == 1 else 'ies'} removed)")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from .report import write_report

    index = _open_index(args, readonly=True)
    try:
        summary = write_report(
            index, args.output, recent=args.recent, pairs=args.pairs, decision_files=args.decisions,
            title_max_distance=args.title_max_distance, body_max_distance=args.body_max_distance,
        )
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {_describe(exc)}") from exc
    finally:
        index.close()
    print(summary, file=sys.stderr)
    return 0


def run_dedup(args: argparse.Namespace, *, outputs: bool = True) -> int:
    """``dedup`` and ``import`` (:mod:`.batch`, imported on use: it imports this module)."""
    from .batch import run_dedup

    return run_dedup(args, outputs=outputs)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "dedup": run_dedup,
    "import": lambda args: run_dedup(args, outputs=False),
    "check": run_check,
    "explain": run_explain,
    "stats": run_stats,
    "export": run_export,
    "purge": run_purge,
    "reset": run_reset,
    "forget": run_forget,
    "report": run_report,
}


def main(argv: Sequence[str] | None = None, *, prog: str = PROG,
         defaults: Mapping[str, Any] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    from .index.base import IndexError_

    parser = build_parser(prog, defaults)
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CliError as exc:
        print(f"{prog} {args.command}: error: {exc}", file=sys.stderr)
        return exc.status
    except IndexError_ as exc:  # e.g. a corrupt or tampered index met halfway through a command
        print(f"{prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
