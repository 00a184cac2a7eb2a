"""The command line's parser: every subcommand, its options and their defaults.

The defaults are the built-in ones (:data:`BUILTIN_DEFAULTS`), or a Scrapy project's settings
(``scrapy simhash``, :mod:`scrapy_simhash.scrapy.commands`): only the defaults change.

An option that sets a ``SIMHASH_*`` setting (``--title-max-distance`` …) is made from the settings
table (:mod:`scrapy_simhash.settings`): its name, its default, how its text is converted and which
values are allowed, refused with the setting's own words (:func:`option_type`). Once parsed, the
values are checked together as the pipeline checks its settings (defaults from a project included;
the distances against ``--bits``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..__version__ import __version__
from .._compiled import describe
from ..settings import BUILTIN_CLI_DEFAULTS, BY_NAME, Setting, SettingError, check_options
from .common import MAX_ERROR_DECISIONS, PROG

#: Option dest → built-in default (from :mod:`scrapy_simhash.settings`). ``scrapy simhash``
#: replaces these with the project's settings.
BUILTIN_DEFAULTS: dict[str, Any] = BUILTIN_CLI_DEFAULTS
#: What dedup and import read.
INPUT_HELP = ("items as Scrapy exports them: JSON lines (.jl, .jsonl) or a JSON array (.json, what "
              "'scrapy crawl -O items.json' writes), gzip-compressed or not ('-' for stdin)")


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps the examples' line breaks and shows defaults: not "None", and not when the help says
    already what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


_OPTION_TYPES: dict[str, Callable[[str], Any]] = {}


def option_type(setting: Setting) -> Callable[[str], Any]:
    """The argparse ``type`` of a setting's option: the text converted and checked as the setting's
    value is (:meth:`.Setting.parse`), refused with what the setting allows. One function per
    setting, whichever subcommand has the option."""
    if setting.name not in _OPTION_TYPES:

        def parse(text: str) -> Any:
            try:
                parsed = setting.parse([text] if setting.repeated else text)
            except SettingError as exc:
                raise argparse.ArgumentTypeError(f"{text!r} is not allowed: {exc.allowed}") from None
            return parsed[0] if setting.repeated else parsed

        parse.__name__ = setting.name
        _OPTION_TYPES[setting.name] = parse
    return _OPTION_TYPES[setting.name]


class _Parser(argparse.ArgumentParser):
    """The top-level parser: checks the setting options' values once a command line is parsed."""

    commands: Mapping[str, argparse.ArgumentParser] = {}

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        parsed, rest = super().parse_known_args(*args, **kwargs)
        try:
            check_options(vars(parsed))
        except SettingError as exc:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            option = BY_NAME[exc.name].option
            dest = BY_NAME[exc.name].flag
            if dest is not None and getattr(parsed, dest, None) is not command.get_default(dest):
                command.error(f"argument {option}: {str(exc.raw)!r} is not allowed: {exc.allowed}")
            command.error(f"{exc} (the default of {option})")  # a project's setting
        return parsed, rest


def _setting_option(g: argparse._ActionsContainer, d: Mapping[str, Any], name: str, **kwargs: Any) -> None:
    """The option of setting ``name``: its name, default (from ``d``), conversion and check from the
    table; ``kwargs`` add its help and metavar, or replace its default or action."""
    s = BY_NAME[name]
    assert s.option is not None and s.flag is not None, f"{name} has no command-line option"
    kwargs.setdefault("default", d[s.flag])
    if kwargs.get("action") in (None, "append"):
        kwargs.setdefault("type", option_type(s))
    g.add_argument(s.option, dest=s.flag, **kwargs)


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {n}")
    return n


def _non_negative_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {n}")
    return n


def _share(value: str) -> float:
    x = float(value)
    if not 0 < x <= 1:
        raise argparse.ArgumentTypeError(f"must be a share above 0 and at most 1, not {value}")
    return x


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

    parser = _Parser(
        prog=prog,
        formatter_class=_Formatter,
        description="Near-duplicate (repost) detection for news items with simhash: dedup JSON-lines "
        "exports and inspect or maintain the index the Scrapy pipeline uses.",
        epilog=f"examples:\n  {prog} dedup items.jsonl.gz --index index.sqlite3 -o kept.jsonl "
        f"--decisions decisions.jsonl\n  {prog} stats --index index.sqlite3\n"
        f"  {prog} check --index index.sqlite3 --title '…' --body '…'\n"
        f"run '{prog} SUBCOMMAND --help' for the options of each subcommand.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} ({describe()})",
                        help="show the version and the fingerprint engine in use (compiled or pure Python), and exit")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True,
                                parser_class=argparse.ArgumentParser)
    parser.commands = sub.choices

    def setting(g: argparse._ActionsContainer, name: str, **kwargs: Any) -> None:
        _setting_option(g, d, name, **kwargs)

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
        index(g, required=not in_project, metavar="PATH_OR_URL", help=help_index)
        setting(g, "SIMHASH_NAMESPACE", help="index namespace (SIMHASH_NAMESPACE)")
        redis_unsafe(g)

    def index(g: argparse._ActionsContainer, **kwargs: Any) -> None:
        # no type: a location is read where the index is opened, which says what is wrong with one
        setting(g, "SIMHASH_INDEX_URL", type=None, default=d["index"] if in_project else None, **kwargs)

    def redis_unsafe(g: argparse._ActionsContainer) -> None:
        setting(g, "SIMHASH_REDIS_UNSAFE", metavar="{refuse,warn}",
                help="a Redis server that may evict keys or lose acknowledged writes: refuse it, or warn "
                     "(SIMHASH_REDIS_UNSAFE)")

    def field_options(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("fields (comma-separated candidates: the first present, non-empty one is used)")
        setting(g, "SIMHASH_TITLE_FIELD", default=_fields_default(d["title_field"]), metavar="NAMES",
                help="title field(s)")
        setting(g, "SIMHASH_BODY_FIELD", default=_fields_default(d["body_field"]), metavar="NAMES",
                help="body field(s), HTML or text or a list of paragraphs")
        setting(g, "SIMHASH_URL_FIELD", default=_fields_default(d["url_field"]), metavar="NAMES",
                help="URL field(s)")

    def distance_options(g: argparse._ActionsContainer, **kwargs: Any) -> None:
        title_help = kwargs.pop("title_help", "title within this many bits → duplicate")
        body_help = kwargs.pop("body_help", "else body within this many bits → duplicate")
        setting(g, "SIMHASH_TITLE_MAX_DISTANCE", metavar="BITS", help=title_help, **kwargs)
        setting(g, "SIMHASH_BODY_MAX_DISTANCE", metavar="BITS", help=body_help, **kwargs)

    def tier_options(p: argparse.ArgumentParser, actions: bool = True) -> None:
        g = p.add_argument_group("tiers and fingerprints (as the pipeline's SIMHASH_* settings)")
        distance_options(g)
        if actions:
            setting(g, "SIMHASH_TITLE_ACTION", metavar="{drop,flag}",
                    help="what a title-tier match does (flag: keep it, status 'flagged')")
            setting(g, "SIMHASH_BODY_ACTION", metavar="{drop,flag}", help="what a body-tier match does")
        setting(g, "SIMHASH_TTL_DAYS", metavar="DAYS",
                help="entries older than this never match (default: they never expire; 0: never)")
        setting(g, "SIMHASH_DYNAMIC_THRESHOLD", action=argparse.BooleanOptionalAction,
                default=bool(d["dynamic_threshold"]),
                help="body threshold by length: +2 bits under 100 chars, -1 over 2000")
        setting(g, "SIMHASH_BITS", metavar="{32,64,128}", help="fingerprint size")
        setting(g, "SIMHASH_TOP_K", metavar="K", help="features kept per body")
        setting(g, "SIMHASH_MAX_SHARE", metavar="SHARE",
                help="cap of any one body word's share of the weight (0: no cap)")
        setting(g, "SIMHASH_STOP_WORDS", metavar="FILE", help="extra stop words, one per line")
        setting(g, "SIMHASH_USER_DICT", metavar="FILE", help="jieba user dictionary")
        setting(g, "SIMHASH_TITLE_PATTERNS", action="append", default=list(d["title_pattern"] or []), metavar="REGEX",
                help="extra title suffix to remove (repeatable)")
        setting(g, "SIMHASH_MAIN_CONTENT", action=argparse.BooleanOptionalAction,
                help="reduce every HTML body to its main text (--no-main-content: none; default: "
                     "bodies that look like whole pages)")
        setting(g, "SIMHASH_TITLE_NUMBERS", metavar="PCT",
                help="a title match counts only if the bodies' numbers overlap this much (0: off)")
        setting(g, "SIMHASH_SENTENCES_SHARED", metavar="PCT",
                help="sentence tier (0: off): more than PCT %% of an earlier story's sampled sentences "
                     "here → duplicate (50 recommended; 0: off)")

    def optional_index_options(p: argparse.ArgumentParser, what: str) -> None:
        g = p.add_argument_group("index (optional)")
        help_index = f"index file path or URL: {what}"
        if in_project:
            help_index += "; default: the project's"
        index(g, metavar="PATH_OR_URL", help=help_index)
        setting(g, "SIMHASH_NAMESPACE", help="index namespace (SIMHASH_NAMESPACE); labels of other namespaces "
                                             "are left out")
        redis_unsafe(g)

    def labels_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--labels", metavar="PATH",
                       help="the labels file (default: next to a SQLite index, its name with .labels.jsonl; "
                            "required for Redis)")

    def json_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    # dedup
    p = add("dedup", "dedup a JSON-lines file against the index (adding new items)",
            "Read items (JSON lines or a JSON array, gzip or not; '-' for stdin), check each item in input "
            "order against the index (title tier, else body tier, else the sentence tier) and add the "
            "new ones. Kept items (new and flagged) go to -o, one decision per item to --decisions. Bad "
            f"lines are reported with their line number, counted and skipped (the first {MAX_ERROR_DECISIONS:,} get "
            "an error decision); blank lines and lines with neither a title nor a body are counted in the summary, "
            "without a decision.\n\ndecision record: "
            "{\"line\": 1-based (the item's number in a JSON array), \"url\", "
            "\"status\": new|duplicate|flagged|skipped|error, "
            "\"tier\": title|body|sentence|null, \"distance\": int|null, "
            "\"original\": URL of the matched item|null, \"error\": message|null} (for 'skipped', the reason)",
            ["items.jsonl --index index.sqlite3 -o kept.jsonl --decisions decisions.jsonl",
             "export.jsonl.gz --index sqlite:///data/index.sqlite3 --jobs 2 -o kept.jsonl.gz",
             "- --index index.sqlite3 --body-field content,text -o - < items.jsonl > kept.jsonl",
             "items.jsonl --index index.sqlite3 --body-action flag --decisions - | grep flagged"])
    p.add_argument("input", metavar="INPUT", help=INPUT_HELP)
    p.add_argument("-o", "--output", metavar="KEPT", help="write kept items here (.gz compresses, '-' stdout)")
    p.add_argument("--decisions", metavar="FILE", help="write one decision per item here (.gz, '-')")
    _run_options(p, d)
    index_options(p)
    field_options(p)
    tier_options(p)

    # import
    p = add("import", "warm the index from an existing JSON-lines corpus (summary only)",
            "Like dedup, without outputs: every new item is added to the index; the summary says how many "
            "were duplicates of each other or of what the index already held.",
            ["corpus.jsonl.gz --index index.sqlite3", "old-crawl.jsonl --index index.sqlite3 --jobs 2 --reset"])
    p.add_argument("input", metavar="INPUT", help=INPUT_HELP)
    _run_options(p, d)
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
    p.add_argument("url", metavar="URL", help="the URL of an item a crawl or a dedup run checked")
    labels_option(p)
    json_option(p)
    index_options(p)

    # stats
    p = add("stats", "entries per namespace, parameters, file size, oldest/newest",
            "Print what the index holds and how it was built.",
            ["--index index.sqlite3", "--index redis://localhost:6379/0 --json"])
    json_option(p)
    index_options(p)

    # runs
    p = add("runs", "the namespace's recent crawls: counts, dedup rate, decision latency",
            "Print the crawls of the namespace the index remembers (the last 50), newest first: when each "
            "started and ended (a crawl that was killed has no end), its spider, what it admitted, dropped per "
            "tier, flagged, skipped and passed on unchecked, its index errors and dead workers, its dedup rate "
            "(duplicates over items checked) and its decision latency (50th and 95th percentile, maximum, ms).",
            ["--index index.sqlite3", "--index redis://localhost:6379/0 --limit 5 --json"])
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="the N most recent runs")
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
    p.add_argument("--older-than", type=_positive_float, required=True, metavar="DAYS",
                   help="remove the entries first seen more than DAYS days ago (a fraction is fine)")
    index_options(p)

    # reset
    p = add("reset", "remove every entry and decision of the namespace",
            "Empty the namespace. Asks for confirmation on a terminal; without a terminal it refuses unless "
            "--yes is given.",
            ["--index index.sqlite3", "--index index.sqlite3 --namespace test --yes"])
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    index_options(p)

    # reband
    p = add("reband", "rebuild the band rows of an index for other thresholds",
            "Rebuild the band rows from the full fingerprints every entry keeps, for a larger (or smaller) "
            "threshold. A SQLite file in one "
            "transaction: interrupted, the index is left as it was; crawls sharing the file wait for it (their "
            "busy timeout). A Redis index (every namespace) as new band tables, the old ones serving until they "
            "are complete: interrupted, the index is left as it was; crawlers that had it open fail at their next "
            "call and must reopen it (stop them first). Without threshold options, the recorded ones are kept.",
            ["index.sqlite3", "index.sqlite3 --body-max-distance 5", "--index index.sqlite3 --body-bands 6",
             "'redis://127.0.0.1:6379/0?prefix=news' --body-max-distance 5"])
    p.add_argument("path", nargs="?", metavar="PATH", help="the index file or Redis URL (default: --index)")
    g = p.add_argument_group("new thresholds (default: the recorded ones)")
    g.add_argument("--title-bands", type=_positive_int, metavar="N", help="answer title distances up to N-1")
    g.add_argument("--body-bands", type=_positive_int, metavar="N", help="answer body distances up to N-1")
    distance_options(g, default=None, title_help="answer title distances up to BITS (as --title-bands BITS+1)",
                     body_help="answer body distances up to BITS (with --dynamic-threshold: BITS+2)")
    setting(g, "SIMHASH_DYNAMIC_THRESHOLD", action="store_true", default=False,
            help="room for the dynamic threshold's 2 extra body bits")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    g = p.add_argument_group("index")
    index(g, metavar="PATH", help="the index file or URL, when PATH is not given")
    redis_unsafe(g)

    # forget
    p = add("forget", "remove one entry, by id or URL",
            "Remove the entry with this id (a number, as export shows) or URL, so its story is admitted "
            "again. Exit status 1 when there is no such entry.",
            ["https://example.com/news/1.html --index index.sqlite3", "42 --index index.sqlite3"])
    p.add_argument("key", metavar="ID_OR_URL", help="the entry's id (a number, as export shows) or its URL")
    index_options(p)

    # report
    p = add("report", "self-contained HTML page: distance histograms and closest pairs per tier",
            "Write one HTML page (inline CSS and SVG, no scripts, no external resources) showing, per tier, "
            "the distance histogram of recent decisions and of the recent entries' nearest neighbours, and "
            "the closest pairs on both sides of the threshold, so you can see whether the thresholds suit "
            "your sites.",
            ["-o report.html --index index.sqlite3",
             "-o report.html --index index.sqlite3 --recent 2000 --decisions decisions.jsonl"])
    p.add_argument("-o", "--output", required=True, metavar="HTML", help="the HTML file to write")
    p.add_argument("--recent", type=_positive_int, default=1000, metavar="N",
                   help="recent entries/decisions examined")
    p.add_argument("--pairs", type=_positive_int, default=8, metavar="N", help="pairs shown per side and tier")
    p.add_argument("--decisions", action="append", default=[], metavar="FILE",
                   help="also read decisions of dedup runs from this file (repeatable)")
    g = p.add_argument_group("thresholds shown (default: the index's or the settings')")
    distance_options(g, title_help="the title tier's threshold the page shows",
                     body_help="the body tier's threshold the page shows")
    index_options(p)

    # review
    p = add("review", "label decisions and near misses as same story / different story",
            "Show recent decisions (dropped or flagged items and the original each matched) and near misses "
            "(entries admitted as new and their nearest earlier entry by title or body), one pair at a time, "
            "and ask: same story or different? Each answer is appended at once to the labels file, JSON lines "
            "(next to a SQLite index: index.sqlite3 → index.labels.jsonl; a Redis index needs --labels). Pairs "
            "already labelled are not asked again. Answers are read from stdin, one a line (s, d, k to skip, "
            "q to stop): a terminal, or a file of answers piped in. The index is only read. The index keeps "
            "no dropped item's body: give the crawl's export with --items (crawled with SIMHASH_TITLE_ACTION "
            "and SIMHASH_BODY_ACTION = flag, so that no item is dropped) for labels that tune can replay "
            "in full.",
            ["--index index.sqlite3", "--index index.sqlite3 --items items.jsonl --by alice",
             "--index redis://localhost:6379/0 --labels labels.jsonl --near 20"])
    labels_option(p)
    p.add_argument("--items", metavar="FILE",
                   help="the crawl's items (as dedup reads them): the decided items' own fingerprints")
    p.add_argument("--recent", type=_positive_int, default=1000, metavar="N",
                   help="recent decisions and entries examined")
    p.add_argument("--near", type=_positive_int, default=10, metavar="N",
                   help="near misses offered per tier, closest first")
    p.add_argument("--limit", type=_positive_int, metavar="N", help="ask about at most N pairs this time")
    p.add_argument("--by", metavar="NAME", help="who labels (default: the login name)")
    _setting_option(p, d, "SIMHASH_MAX_LINE_BYTES", metavar="BYTES", help="skip a longer line of --items")
    index_options(p)
    field_options(p)
    tier_options(p, actions=False)

    # tune
    p = add("tune", "precision and recall of other settings on your labels; the best one to paste",
            "Replay every labelled pair (and, with --index, the index's recorded decisions) under other "
            "title and body thresholds, number guards and sentence tiers, and print for each setting the "
            "pairs it calls duplicates against the labels: precision and recall with 95 % Wilson intervals, "
            "the current settings' row, the suggested one, and whether the index must be re-banded for it. "
            "Writes nothing: --apply prints the suggested settings block to paste into settings.py.",
            ["index.labels.jsonl", "index.labels.jsonl --index index.sqlite3",
             "index.labels.jsonl --apply >> settings_tuned.py", "labels.jsonl --body-up-to 12 --json"])
    p.add_argument("labels_file", metavar="LABELS", help="the labels file review wrote")
    p.add_argument("--title-up-to", type=_non_negative_int, default=6, metavar="BITS",
                   help="title thresholds tried: 0 to BITS")
    p.add_argument("--body-up-to", type=_non_negative_int, default=10, metavar="BITS",
                   help="body thresholds tried: 0 to BITS")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N", help="best settings shown")
    p.add_argument("--recent", type=_positive_int, default=1000, metavar="N",
                   help="recorded decisions of --index replayed")
    p.add_argument("--apply", action="store_true",
                   help="print only the suggested settings block (nothing is written anywhere)")
    json_option(p)
    optional_index_options(p, "the index whose recorded decisions are replayed too, and whose bands say "
                              "whether a re-band is needed")
    tier_options(p, actions=False)

    # stopwords (its defaults: docs/decisions/0812-stop-words-share.md)
    p = add("stopwords", "propose stop words: words in a large share of your items (site chrome)",
            "Count in how many items' bodies (cleaned as the pipeline cleans them) each word appears and "
            "propose those in at least --min-share of them that the fingerprint's IDF weighs as rare (at "
            "least --min-lift times more common here than in general text): site chrome, disclaimers, "
            "bylines, not common language. With --index, "
            "only the items that are entries of the namespace count (one copy per story: a much reposted "
            "story does not make its own words common). -o appends the new ones to a stop words file "
            "(SIMHASH_STOP_WORDS reads it). The index is only read; fingerprints made with other stop words "
            "differ, so use a new list on a re-indexed namespace.",
            ["items.jsonl", "items.jsonl --index index.sqlite3 -o stopwords.txt",
             "items.jsonl --min-share 0.5 --stop-words stopwords.txt"])
    p.add_argument("input", metavar="INPUT", help=INPUT_HELP)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="append the proposed words this file lacks (one a line; created if missing)")
    p.add_argument("--min-share", type=_share, default=0.3, metavar="SHARE",
                   help="propose words in at least this share of the items (0-1)")
    p.add_argument("--min-lift", type=_positive_float, default=50, metavar="TIMES",
                   help="… and at least TIMES as often as the word's IDF says it appears in general text (its "
                        "weight treats it as rare: site chrome, not common language)")
    p.add_argument("--min-items", type=_positive_int, default=20, metavar="N",
                   help="propose nothing from fewer items than this")
    p.add_argument("--top", type=_positive_int, default=50, metavar="N", help="propose at most N words")
    _setting_option(p, d, "SIMHASH_MAX_LINE_BYTES", metavar="BYTES", help="skip a longer line")
    optional_index_options(p, "count only the items that are entries of the namespace")
    field_options(p)
    tier_options(p, actions=False)
    return parser


def _run_options(p: argparse.ArgumentParser, d: Mapping[str, Any]) -> None:
    p.add_argument("--jobs", "-j", type=_positive_int, default=1, metavar="N",
                   help="fingerprint on N processes (decisions stay in input order, identical to --jobs 1)")
    p.add_argument("--reset", action="store_true", help="empty the namespace first")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-line error reports, summary only")
    _setting_option(p, d, "SIMHASH_MAX_LINE_BYTES", metavar="BYTES",
                    help="skip (and count) a line or array element longer than this, without loading it whole "
                        "(default: %(default)s)")


