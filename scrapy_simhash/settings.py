"""Every ``SIMHASH_*`` setting described once, and the one place Scrapy settings are read.

Each :class:`Setting` of :data:`SETTINGS` gives its name, its default (the value in
:mod:`.defaults`), how a value is converted (:attr:`Setting.convert`: the same for a project's
settings, ``-s NAME=text`` and a command-line option), which values are allowed (:attr:`Setting.valid`,
said to the user as :attr:`Setting.allowed`), and what it feeds: a keyword of
:meth:`~scrapy_simhash.Deduplicator.open` (``engine``), an entry of its ``index_options``
(``index_option``), a command-line option (``flag``, the argparse dest of ``--<flag>``), or only the
pipeline. That one rule per setting is applied wherever a value comes from:

* the pipeline's settings (:func:`check_settings`, before the crawl starts),
* the command line's options, and their defaults from a project (:func:`check_options`;
  :mod:`scrapy_simhash.cli.parser` makes each setting's option from this table),
* the Deduplicator's keyword arguments for callers in Python (:func:`check_keywords`),

each refusing a value with :class:`SettingError` (the value, and what is allowed). From the table
come also the pipeline's engine options (:func:`engine_options`), the option defaults of ``scrapy
simhash`` (:func:`cli_defaults`) and of ``scrapy-simhash`` (:data:`BUILTIN_CLI_DEFAULTS`), the
per-spider overrides (:func:`effective_settings`) and the settings reference of the documentation
(``docs/_ext/simhash_reference.py``, ``tests/test_settings_doc.py``).

scrapy-redis's ``REDIS_*`` settings are read here too (:func:`index_url_from_settings`,
:func:`redis_params_from_settings`): the index package knows nothing of Scrapy.

Nothing is imported from Scrapy at import time: the command line reads this table and must start
fast without it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import defaults as D
from .setting_values import (
    ACTIONS,
    BITS_CHOICES,
    LOG_LEVELS,
    ON_INDEX_ERROR_CHOICES,
    PROFILES,
    REDIS_UNSAFE_CHOICES,
    as_auto_bool,
    as_bool,
    as_dict,
    as_field_names,
    as_float,
    as_float_or_none,
    as_int,
    as_int_or_none,
    as_is,
    as_list,
    as_lower,
    as_upper,
    as_workers,
    int_from,
    number_above,
    number_between,
    number_from,
    one_of,
    valid_index_url,
    valid_max_share,
    valid_names,
    valid_nonempty_str,
    valid_optional_file,
    valid_regexes,
    valid_stop_words,
    valid_ttl,
)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.settings import BaseSettings, Settings


def _index_url(settings: BaseSettings) -> str:
    short = settings.get("SIMHASH_PROFILE") == "short"
    return index_url_from_settings(settings) or default_index_url(D.SHORT_INDEX_FILENAME if short else D.INDEX_FILENAME)


_UNSET: Any = object()


class SettingError(ValueError):
    """A ``SIMHASH_*`` setting (or the command-line option or keyword argument of one) whose value the
    plugin cannot run with; the message names it, its value and what is allowed."""

    def __init__(self, name: str, raw: Any, allowed: str, label: str | None = None) -> None:
        super().__init__(f"{label or name} = {raw!r} is not allowed: {allowed}")
        self.name = name  #: the setting
        self.raw = raw  #: the value refused, as given
        self.allowed = allowed  #: what is allowed


@dataclass(frozen=True)
class Setting:
    """One ``SIMHASH_*`` setting: its default, how a value is converted and checked, what it feeds."""

    name: str
    default: Any
    #: A raw value (Python, settings text or command-line text) → the value; may raise TypeError or ValueError.
    convert: Callable[[Any], Any] = as_is
    engine: str | None = None  #: keyword of Deduplicator.open
    index_option: str | None = None  #: key of Deduplicator.open's index_options
    flag: str | None = None  #: argparse dest of its command-line option ``--<flag with dashes>``
    per_spider: bool = False  #: a spider attribute ``simhash_<name>`` overrides it
    #: What values are allowed, said to a user whose value is not (with ``valid``, which tests one).
    allowed: str = ""
    valid: Callable[[Any], bool] | None = None
    #: Read from the whole settings rather than this setting's value (other settings take part).
    gather: Callable[[BaseSettings], Any] | None = None
    #: Its command-line option is repeated, once per item of the value's list.
    repeated: bool = False
    #: What it does, for a user: the settings reference (docs/settings.md) is made from it, and its
    #: build fails for a setting without one.
    doc: str = ""

    @property
    def option(self) -> str | None:
        """Its command-line option (``--title-max-distance``), if it has one."""
        return None if self.flag is None else "--" + self.flag.replace("_", "-")

    def read(self, settings: BaseSettings) -> Any:
        """Its value in Scrapy ``settings`` (from :func:`effective_settings`), converted, not checked;
        :class:`SettingError` for a value that cannot be converted."""
        if self.gather is not None:
            return self.gather(settings)
        raw = settings.get(self.name)
        try:
            return self.convert(raw)
        except (TypeError, ValueError) as exc:
            raise SettingError(self.name, raw, self.allowed or str(exc)) from exc

    def allows(self, value: Any) -> bool:
        """Whether the plugin can run with ``value`` (a converted value)."""
        if self.valid is None:
            return True
        try:
            return bool(self.valid(value))
        except (TypeError, ValueError):
            return False

    def check(self, value: Any, raw: Any = _UNSET, label: str | None = None) -> Any:
        """``value`` if it is allowed, else :class:`SettingError` (showing ``raw``, the value as given)."""
        if not self.allows(value):
            raise SettingError(self.name, value if raw is _UNSET else raw, self.allowed, label)
        return value

    def parse(self, raw: Any, label: str | None = None) -> Any:
        """A raw value converted and checked, else :class:`SettingError`."""
        try:
            value = self.convert(raw)
        except (TypeError, ValueError) as exc:
            raise SettingError(self.name, raw, self.allowed or str(exc), label) from exc
        return self.check(value, raw, label)


#: Every setting, in the settings reference's order.
SETTINGS: tuple[Setting, ...] = (
    Setting("SIMHASH_PROFILE", D.PROFILE, as_lower, engine="profile", per_spider=True,
            allowed="'news' or 'short'", valid=one_of(PROFILES),
            doc='What the items are: `"news"` (articles with a title and a body) or `"short"` (comments, reviews, '
            "posts, replies: one text field, no title). The short profile changes the defaults of the settings a "
            "project does not set: 32-bit fingerprints (`SIMHASH_BITS`), body distance 5, no sentence tier, the "
            "body fields `text`, `content`, `comment`, `review`, `body`, its own index file "
            "(`.scrapy/simhash/short.sqlite3`) and namespace `short`, its stats under `simhash/short/`; it removes "
            "the symbols and spaces stuffed between CJK characters and confirms every match by characters. On "
            "Redis, give it its own `?prefix=` or database: an index holds fingerprints of one kind."),
    Setting("SIMHASH_SPAM_PATTERNS", D.SPAM_PATTERNS, allowed="a path to a readable file, or None",
            valid=valid_optional_file,
            doc="A file of spam patterns, one a line: a phrase (found in an item's text with its spaces, "
            "punctuation and symbols removed, case ignored), or `re:` and a regular expression (searched in the "
            "normalized text). Empty lines and lines starting with `#` are ignored. A match counts in "
            "`simhash/spam` (under `simhash/short/` in the short profile) and does what `SIMHASH_SPAM_ACTION` says."),
    Setting("SIMHASH_SPAM_ACTION", D.SPAM_ACTION, as_lower, per_spider=True,
            allowed="'count', 'flag' or 'drop'", valid=one_of(("count", "flag", "drop")),
            doc='What an item matching a spam pattern gets: `"count"` (counted only, then checked as usual), '
            '`"flag"` (`{"status": "spam", "pattern": …}` in `SIMHASH_FLAG_FIELD`, then checked as usual) or '
            '`"drop"` (dropped with `SpamDrop`, not added to the index).'),
    Setting("SIMHASH_AUTHOR_FIELD", D.AUTHOR_FIELD, per_spider=True,
            allowed="a field name, or None", valid=lambda v: v is None or valid_nonempty_str(v),
            doc="An item field holding its author or IP. An author's items within `SIMHASH_AUTHOR_WINDOW` seconds "
            "of each other are compared with a stricter threshold (character similarity 0.6 instead of 0.8): "
            "the same account posting the same comment reworded is dropped (`simhash/dropped/author`). The last "
            "items of each author are kept in the crawl process's memory, not in the index."),
    Setting("SIMHASH_AUTHOR_WINDOW", D.AUTHOR_WINDOW, as_float, per_spider=True,
            allowed="a number of seconds > 0", valid=number_above(0),
            doc="Seconds within which an author's consecutive items are checked more strictly "
            "(`SIMHASH_AUTHOR_FIELD`)."),
    Setting("SIMHASH_ENABLED", D.ENABLED, as_bool, per_spider=True,
            allowed="True or False",
            doc="`False`: the pipeline is not loaded (`NotConfigured`), or, set for one spider, does nothing for it."),
    Setting("SIMHASH_INDEX_URL", D.INDEX_URL, gather=_index_url, flag="index",
            allowed="None (the project's .scrapy/simhash/index.sqlite3), a path, or a sqlite:///, redis://, "
            "rediss:// or unix:// URL", valid=valid_index_url,
            doc="Where the index lives: a SQLite file, or Redis for many machines (`?prefix=NAME` keeps several "
            "indexes in one database). Unset: the project's `.scrapy/simhash/index.sqlite3`, or scrapy-redis's "
            "`REDIS_URL` when scrapy-redis is in use."),
    Setting("SIMHASH_NAMESPACE", D.NAMESPACE, engine="namespace", flag="namespace", per_spider=True,
            allowed="a non-empty string", valid=valid_nonempty_str,
            doc="Keeps entries apart within one index: items are compared with the entries of their namespace only "
            "(e.g. one per project or language)."),
    Setting("SIMHASH_TITLE_FIELD", D.TITLE_FIELD, as_field_names, flag="title_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=valid_names,
            doc="Item field(s) holding the title: a name, a list or a comma-separated string of candidates; the first "
            "present, non-empty one is used."),
    Setting("SIMHASH_BODY_FIELD", D.BODY_FIELD, as_field_names, flag="body_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=valid_names,
            doc="Item field(s) holding the body: HTML or text, as `str`, `bytes` or a list of paragraphs."),
    Setting("SIMHASH_URL_FIELD", D.URL_FIELD, as_field_names, flag="url_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=valid_names,
            doc="Item field(s) holding the URL, shown as the original of later duplicates and used by `explain` and "
            "`forget`."),
    Setting("SIMHASH_TITLE_MAX_DISTANCE", D.TITLE_MAX_DISTANCE, as_int, engine="title_max_distance",
            flag="title_max_distance",
            allowed="an integer from 0 to SIMHASH_BITS - 1 (bits of difference)", valid=int_from(0),
            doc="Title tier: two titles within this many bits are one story (when their bodies do not contradict it). "
            "Above what the index was built for, the index must be re-banded (`scrapy-simhash reband`)."),
    Setting("SIMHASH_BODY_MAX_DISTANCE", D.BODY_MAX_DISTANCE, as_int, engine="body_max_distance",
            flag="body_max_distance",
            allowed="an integer from 0 to SIMHASH_BITS - 1 (bits of difference)", valid=int_from(0),
            doc="Body tier: two bodies within this many bits are one story. Above what the index was built for, the "
            "index must be re-banded."),
    Setting("SIMHASH_BITS", D.BITS, as_int, engine="bits", flag="bits",
            allowed="32, 64 or 128", valid=one_of(BITS_CHOICES),
            doc="Fingerprint size. Recorded in the index, which refuses another value: use a new index."),
    Setting("SIMHASH_TOP_K", D.TOP_K, as_int, engine="top_k", flag="top_k",
            allowed="a positive integer", valid=int_from(1),
            doc="Body features kept per fingerprint (the heaviest TF-IDF words, ties kept). Recorded in the index, "
            "which refuses another value."),
    Setting("SIMHASH_MAX_SHARE", D.MAX_SHARE, as_float_or_none, engine="max_share", flag="max_share",
            allowed="None or 0 (no cap), or a share greater than 0 and at most 1", valid=valid_max_share,
            doc="Cap of any one body word's share of the body's weight, so that no repeated word decides a "
            "fingerprint alone and different stories on one topic stay apart. Recorded in the index, which "
            "refuses another value."),
    Setting("SIMHASH_TITLE_ACTION", D.TITLE_ACTION, engine="title_action", flag="title_action", per_spider=True,
            allowed='"drop" or "flag"', valid=one_of(ACTIONS),
            doc='What a title-tier match does: `"drop"` it, or `"flag"`: pass it on with the verdict in '
            "`SIMHASH_FLAG_FIELD`."),
    Setting("SIMHASH_BODY_ACTION", D.BODY_ACTION, engine="body_action", flag="body_action", per_spider=True,
            allowed='"drop" or "flag"', valid=one_of(ACTIONS),
            doc='What a body-tier or sentence-tier match does: `"drop"` it, or `"flag"` it for review (the verdict in '
            "`SIMHASH_FLAG_FIELD`)."),
    Setting("SIMHASH_FLAG_FIELD", D.FLAG_FIELD,
            allowed="a non-empty string (an item field name)", valid=valid_nonempty_str,
            doc='Field that receives the verdict of a flagged (or, with `SIMHASH_ON_INDEX_ERROR = "pass"`, unchecked) '
            "item: status, tier, distance and the original's id, URL, title and first-seen time."),
    Setting("SIMHASH_STORY_FIELD", D.STORY_FIELD,
            allowed='an item field name, or None/"" for no story key',
            valid=lambda v: v is None or isinstance(v, str),
            doc="Field that receives every admitted item's story key: its title and body fingerprints in hex, the "
            "same whenever the same text is admitted again, so a storage pipeline can upsert on it and a "
            "re-delivery after a crash stores nothing twice (docs/delivery.md)."),
    Setting("SIMHASH_TTL_DAYS", D.TTL_DAYS, as_float_or_none, engine="ttl_days", flag="ttl_days", per_spider=True,
            allowed="None or 0 (never expire), or a positive number of days", valid=valid_ttl,
            doc="Entries older than this many days stop matching and are purged when the spider opens "
            "(`simhash/expired`); unset: entries never expire."),
    Setting("SIMHASH_RESET", D.RESET, as_bool, engine="reset", per_spider=True,
            allowed="True or False",
            doc="Empty this namespace of the index when the spider opens (`-s SIMHASH_RESET=1`); an index that cannot "
            "answer the thresholds is re-banded for them first, its other namespaces kept."),
    Setting("SIMHASH_DROP_LOG_LEVEL", D.DROP_LOG_LEVEL, as_upper,
            allowed="DEBUG, INFO, WARNING, ERROR or CRITICAL", valid=one_of(LOG_LEVELS),
            doc='Level of the one-line `Dropped: near-duplicate …` and `Flagged: …` messages (`"DEBUG"` hides them at '
            "Scrapy's default level)."),
    Setting("SIMHASH_USER_DICT", D.USER_DICT, engine="user_dict", flag="user_dict",
            allowed="None or the path of an existing file", valid=valid_optional_file,
            doc="Path of a jieba user dictionary (`word [freq] [tag]` per line), for words jieba does not know."),
    Setting("SIMHASH_STOP_WORDS", D.STOP_WORDS, engine="stop_words", flag="stop_words",
            allowed="None, the path of an existing file, or a list of words", valid=valid_stop_words,
            doc="Extra stop words, left out of the features: a path (one word per line) or a list."),
    Setting("SIMHASH_DYNAMIC_THRESHOLD", D.DYNAMIC_THRESHOLD, as_bool, engine="dynamic_threshold",
            flag="dynamic_threshold",
            allowed="True or False",
            doc="Body threshold by length: 2 bits more under 100 characters, 1 less over 2,000 (the index must be "
            "built or re-banded with it)."),
    Setting("SIMHASH_TITLE_PATTERNS", D.TITLE_PATTERNS, as_list, engine="title_patterns", flag="title_pattern",
            allowed="a list of regular expressions", valid=valid_regexes, repeated=True,
            doc='Extra regular expressions removed from titles before fingerprinting: a site\'s own suffixes, prefixes '
            'and labels the built-in lists do not know, e.g. `[r"\\s*-\\s*My Portal$", r"^本台快讯[:：]"]`. They '
            "run in each round of the built-in rules, so a label behind a built-in mark goes too."),
    Setting("SIMHASH_MAIN_CONTENT", D.MAIN_CONTENT, as_auto_bool, engine="main_content", flag="main_content",
            allowed='None or "auto" (whole pages only), True (every HTML body) or False (none)',
            valid=one_of((None, True, False)),
            doc="Reduce bodies to their main text, without navigation, link lists and footers: unset, bodies that "
            "look like a whole page (`<html>`, `<nav>`, 20 links or more) and link-heavy blocks of others; `True` "
            "every HTML body; `False` none."),
    Setting("SIMHASH_SKIP_FIELD", D.SKIP_FIELD,
            allowed='an item field name, or None/"" for no per-item opt-out',
            valid=lambda v: v is None or isinstance(v, str),
            doc="An item with this field true is passed on unchecked (`simhash/skipped/opt_out`)."),
    Setting("SIMHASH_ON_INDEX_ERROR", D.ON_INDEX_ERROR, as_lower,
            allowed='"drop", "pass" or "close"', valid=one_of(ON_INDEX_ERROR_CHOICES),
            doc="What a check-and-add that cannot commit once retried (disk full, a lock held too long, Redis gone) "
            'does: `"drop"` the item (nothing unchecked is stored; a story may be lost), `"pass"` it on '
            'unchecked, marked in `SIMHASH_FLAG_FIELD` (reposts may get through), or `"close"` the spider '
            "(`simhash_index_error`)."),
    Setting("SIMHASH_INDEX_RETRIES", D.INDEX_RETRIES, as_int,
            allowed="an integer >= 0", valid=int_from(0),
            doc="Retries of a failed check-and-add before `SIMHASH_ON_INDEX_ERROR` applies (on a worker or the index "
            "thread, never the reactor)."),
    Setting("SIMHASH_INDEX_RETRY_DELAY", D.INDEX_RETRY_DELAY, as_float,
            allowed="a number of seconds >= 0", valid=number_from(0),
            doc="Seconds before the first retry, doubled for each further one."),
    Setting("SIMHASH_BUSY_TIMEOUT", D.BUSY_TIMEOUT, as_float, index_option="busy_timeout",
            allowed="a number of seconds >= 0", valid=number_from(0),
            doc="Seconds a check-and-add waits for another process's write lock on a SQLite index; worst case per "
            "item: (retries + 1) × this + the delays."),
    Setting("SIMHASH_TITLE_NUMBERS", D.TITLE_NUMBERS, as_int, engine="title_numbers", flag="title_numbers",
            allowed="a percentage from 0 (off) to 100", valid=int_from(0, 100),
            doc="A title match counts only when the two bodies' numbers overlap by this percent (or neither has "
            "numbers), so templated headlines over different figures stay apart; `0` turns the guard off."),
    Setting("SIMHASH_SENTENCES_SHARED", D.SENTENCES_SHARED, as_int, engine="sentences_shared",
            flag="sentences_shared",
            allowed="a percentage from 0 (off) to 99", valid=int_from(0, 99),
            doc="Sentence tier (`0`: off): an earlier item more than this percent of whose 12 sampled sentences (at "
            "least 2) are in this item, or one of them with bodies within 8 bits, is a duplicate, numbers "
            "agreeing. Catches edited reposts."),
    Setting("SIMHASH_REDIS_PARAMS", D.REDIS_PARAMS, as_dict, index_option="redis_params",
            gather=lambda settings: redis_params_from_settings(settings),
            allowed="a dict (JSON object on the command line) of Redis client arguments",
            valid=lambda v: isinstance(v, dict),
            doc="Extra Redis client arguments for a `redis://` index (like scrapy-redis's `REDIS_PARAMS`), e.g. "
            '`{"socket_timeout": 10}`.'),
    Setting("SIMHASH_WORKERS", D.WORKERS, as_workers,
            allowed="None (the cores there are, minus one), 0 (no worker processes) or a number of them",
            valid=int_from(0),
            doc="Processes that fingerprint and check the items, so the crawl keeps its core: unset, the cores there "
            "are minus one (at least 1); `0`, none (a thread of the crawl process). Spawned and warmed when the "
            "spider opens."),
    Setting("SIMHASH_WORKER_TIMEOUT", D.WORKER_TIMEOUT, as_float,
            allowed="a positive number of seconds", valid=number_above(0),
            doc="Seconds a call to a worker (up to 16 items: fingerprints and check-and-adds, the index's waits "
            "included) may go unanswered; then the worker is taken for stuck (stopped, hung), its pool is killed and "
            "replaced, and the call's items are sent again. When the crawl is stopped (Ctrl-C, `SIGTERM`) a worker "
            "gets 3 s more at most."),
    Setting("SIMHASH_MAX_AWAITING", D.MAX_AWAITING, as_int_or_none,
            allowed="None (64 per worker process, at least 256) or a positive number of items",
            valid=lambda v: v is None or int_from(1)(v),
            doc="Items the pipeline holds at once awaiting a verdict (more wait for a place): `None`, 64 per worker "
            "process, at least 256. Items yielded by `start()` are taken from the spider only while the item "
            "pipelines hold fewer (with `ITEM_PIPELINES` rather than the add-on, add "
            "`scrapy_simhash.scrapy.backpressure.StartBackpressure` to `SPIDER_MIDDLEWARES`), so memory stays near "
            "a crawl without the plugin however fast items come."),
    Setting("SIMHASH_SUMMARY", D.SUMMARY, as_bool, allowed="True or False",
            doc="The add-on prints what the plugin did when the crawl ends (kept, dropped per tier, flagged, the "
            "index): `scrapy_simhash.DedupSummary`."),
    Setting("SIMHASH_MAX_LINE_BYTES", D.MAX_LINE_BYTES, as_int, flag="max_line_bytes",
            allowed="a positive number of bytes", valid=int_from(1),
            doc="`scrapy-simhash dedup` and `import`: an input line (or JSON array element) longer than this is "
            "skipped and counted, never loaded whole."),
    Setting("SIMHASH_REDIS_UNSAFE", D.REDIS_UNSAFE, index_option="redis_unsafe", flag="redis_unsafe",
            allowed="'refuse' or 'warn'", valid=one_of(REDIS_UNSAFE_CHOICES),
            doc="A Redis server that may evict keys (`allkeys-*`) or can lose writes it acknowledged (no append-only "
            'file, or `appendfsync no`) forgets entries and re-admits their stories: `"refuse"` it (the crawl '
            'cannot start: `scrapy crawl` exits with status 1), or `"warn"` and use it.'),
    Setting("SIMHASH_MONITOR_RUNS", D.MONITOR_RUNS, as_int, allowed="a positive number of runs", valid=int_from(1),
            doc="The band a crawl's dedup rate is compared with: the dedup rates of this many finished runs of the "
            "same spider before it, from the index's history (`simhash/history/*` stats; `scrapy-simhash runs`)."),
    Setting("SIMHASH_MONITOR_MIN_RUNS", D.MONITOR_MIN_RUNS, as_int, allowed="a positive number of runs",
            valid=int_from(1),
            doc="The dedup-rate monitor (`scrapy_simhash.monitoring`) compares a run only once this many earlier "
            "runs make its band; before, it passes."),
    Setting("SIMHASH_MONITOR_DEDUP_TOLERANCE", D.MONITOR_DEDUP_TOLERANCE, as_float,
            allowed="a share from 0 to 1", valid=number_between(0, 1),
            doc="The dedup-rate monitor fails a run whose dedup rate (duplicates over items checked) is further "
            "than this from the median of its band (0.15: 15 points), the fluctuation alert of a site that "
            "changed its template or a feed that repeats itself."),
    Setting("SIMHASH_MONITOR_LATENCY_P95_MS", D.MONITOR_LATENCY_P95_MS, as_float,
            allowed="a positive number of milliseconds", valid=number_above(0),
            doc="The latency monitor fails a run whose decision latency's 95th percentile "
            "(`simhash/latency/p95_ms`: an item entering the pipeline to its verdict) is above this."),
    Setting("SIMHASH_MONITOR_MAX_INDEX_ERRORS", D.MONITOR_MAX_INDEX_ERRORS, as_int,
            allowed="a number of items, 0 or more", valid=int_from(0),
            doc="The index-error monitor fails a run with more check-and-adds that failed after their retries "
            "(`simhash/index_error`) than this."),
    Setting("SIMHASH_MONITOR_MAX_UNCHECKED", D.MONITOR_MAX_UNCHECKED, as_int,
            allowed="a number of items, 0 or more", valid=int_from(0),
            doc="The unchecked monitor fails a run that passed on more items unchecked "
            "(`simhash/unchecked`, `SIMHASH_ON_INDEX_ERROR = \"pass\"`) than this."),
    Setting("SIMHASH_MONITOR_MAX_WORKERS_DIED", D.MONITOR_MAX_WORKERS_DIED, as_int,
            allowed="a number of workers, 0 or more", valid=int_from(0),
            doc="The workers monitor fails a run in which more fingerprint workers died "
            "(`simhash/workers_died`: killed, out of memory; their items were sent again) than this."),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: Option dest → setting, for the settings with a command-line option.
BY_FLAG: dict[str, Setting] = {s.flag: s for s in SETTINGS if s.flag}
#: Deduplicator.open keyword → setting.
BY_KEYWORD: dict[str, Setting] = {s.engine: s for s in SETTINGS if s.engine}
#: Setting name → default.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
#: Settings a spider may override with an attribute or ``-a simhash_<name>=...``.
PER_SPIDER: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.per_spider)
#: Command-line option defaults of ``scrapy-simhash`` (outside a project): the built-in defaults.
BUILTIN_CLI_DEFAULTS: dict[str, Any] = {s.flag: s.default for s in SETTINGS if s.flag}


def value(settings: BaseSettings, name: str) -> Any:
    """The value of setting ``name``, read as the table says (``settings`` from :func:`effective_settings`)."""
    return BY_NAME[name].read(settings)


def check_distances(bits: Any, distances: Mapping[str, Any], labels: Mapping[str, str] | None = None,
                    raws: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`SettingError` for a distance (setting name → value, each checked on its own
    already) that ``bits``-bit fingerprints cannot differ by: at most ``bits - 1``. ``labels``:
    what to call a setting in the message (a keyword); ``raws``: the values as given."""
    if bits not in BITS_CHOICES:
        return  # refused on its own
    for name, distance in distances.items():
        if distance is not None and distance >= bits:
            raise SettingError(name, (raws or {}).get(name, distance),
                               f"an integer from 0 to SIMHASH_BITS - 1 ({bits - 1})", (labels or {}).get(name))


def check_keywords(keywords: Mapping[str, Any], bits: int | None = None) -> None:
    """Check keyword arguments of :class:`~scrapy_simhash.Deduplicator` (keyword → value, as
    :data:`BY_KEYWORD` names them) as their settings are checked; ``bits``: the fingerprints' size,
    which bounds the distances. Raises :class:`SettingError` naming the keyword."""
    for keyword, given in keywords.items():
        BY_KEYWORD[keyword].check(given, label=keyword)
    distances = {BY_KEYWORD[k].name: v for k, v in keywords.items() if k.endswith("_max_distance")}
    check_distances(bits if bits is not None else keywords.get("bits"), distances,
                    {BY_KEYWORD[k].name: k for k in keywords})


def check_options(values: Mapping[str, Any]) -> None:
    """Check command-line option values (argparse dest → value, e.g. ``vars(args)``) as their
    settings are checked; None (an option not given whose default is "not given") is not checked.
    Raises :class:`SettingError` naming the setting."""
    for dest, given in values.items():
        s = BY_FLAG.get(dest)
        if s is not None and given is not None and s.flag != "index":
            s.check(given)
    check_distances(values.get("bits"), {BY_FLAG[d].name: values[d] for d in ("title_max_distance",
                                                                              "body_max_distance") if d in values})


def check_settings(settings: BaseSettings) -> None:
    """Read every setting of ``settings`` (from :func:`effective_settings`) as the table says and
    raise :class:`SettingError` for the first one that cannot be read or is not allowed."""
    for s in SETTINGS:
        raw = settings.get(s.name)
        if s.name == "SIMHASH_INDEX_URL":
            s.parse(raw)  # as written: no default path, it is not a choice
            continue
        try:
            read = s.read(settings)
        except (TypeError, ValueError) as exc:
            raise SettingError(s.name, raw, s.allowed or str(exc)) from exc
        s.check(read, raw)
    names = ("SIMHASH_TITLE_MAX_DISTANCE", "SIMHASH_BODY_MAX_DISTANCE")
    check_distances(value(settings, "SIMHASH_BITS"), {name: value(settings, name) for name in names},
                    raws={name: settings.get(name) for name in names})


def misspelled_settings(settings: BaseSettings) -> dict[str, str | None]:
    """``SIMHASH_*`` names set in ``settings`` that no setting has → the closest real name (or None)."""
    unknown = [name for name in settings if isinstance(name, str) and name.startswith("SIMHASH_")
               and name not in BY_NAME]
    return {name: next(iter(difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.6)), None) for name in unknown}


def effective_settings(settings: BaseSettings, spider: Spider | None) -> Settings:
    """Crawler settings over the defaults, with the per-spider overrides applied (``simhash_reset =
    "0"`` means False)."""
    from scrapy.settings import Settings

    merged = Settings(DEFAULTS, priority="default")
    merged.setdict(settings.copy_to_dict(), priority="project")
    if spider is not None:
        for name in PER_SPIDER:
            override = getattr(spider, name.lower(), None)
            if override is not None:
                merged.set(name, override, priority="spider")
    if str(merged.get("SIMHASH_PROFILE")).lower() == "short":
        for name, default in D.SHORT_PROFILE.items():  # under what the project or the spider set
            merged.set(name, default, priority="default")
    return merged


def engine_options(settings: BaseSettings) -> dict[str, Any]:
    """Keyword arguments of :meth:`~scrapy_simhash.Deduplicator.open` (all but the index URL)."""
    options: dict[str, Any] = {s.engine: s.read(settings) for s in SETTINGS if s.engine}
    options["index_options"] = {s.index_option: s.read(settings) for s in SETTINGS if s.index_option}
    return options


def cli_defaults(settings: BaseSettings) -> dict[str, Any]:
    """Command-line option defaults (option dest → value) from a project's settings (``scrapy simhash``),
    converted but not checked: the command line checks them as it checks the options given
    (:func:`check_options`)."""
    s = effective_settings(settings, None)
    defaults = {}
    for st in SETTINGS:
        if st.flag:
            try:
                defaults[st.flag] = st.read(s)
            except (TypeError, ValueError):  # refused by the command line, with the setting's message
                defaults[st.flag] = s.get(st.name)
    return defaults


def default_index_url(filename: str = D.INDEX_FILENAME) -> str:
    """``sqlite:///<project>/.scrapy/simhash/index.sqlite3`` (``./.scrapy/…`` outside a project;
    ``filename``: another file there, the short profile's).
    Nothing is created here: the index makes its directory when it makes its file, so a read-only
    command run elsewhere leaves no ``.scrapy/`` behind."""
    from scrapy.utils.project import data_path

    directory = Path(data_path("simhash", createdir=False)).resolve()
    return f"sqlite:///{directory / filename}"


# scrapy-redis's settings


def _uses_scrapy_redis(settings: Any) -> bool:
    def named(value: Any) -> str:
        return value if isinstance(value, str) else f"{getattr(value, '__module__', '')}."

    candidates = [settings.get("SCHEDULER"), settings.get("DUPEFILTER_CLASS")]
    pipelines = settings.getdict("ITEM_PIPELINES") if settings.get("ITEM_PIPELINES") else {}
    candidates += list(pipelines)
    return any(c is not None and named(c).startswith("scrapy_redis.") for c in candidates)


def index_url_from_settings(settings: Any) -> str | None:
    """The index URL a crawl's settings name: ``SIMHASH_INDEX_URL``; else, when scrapy-redis is in
    use (its scheduler, dupefilter or item pipeline is configured), scrapy-redis's own Redis
    (``REDIS_URL``, else ``REDIS_HOST``/``REDIS_PORT``, else its default ``localhost:6379``), so the
    dedup index lives next to the shared queue; else None (the pipeline's default SQLite file)."""
    url = settings.get("SIMHASH_INDEX_URL")
    if url:
        return str(url)
    if not _uses_scrapy_redis(settings):
        return None
    if settings.get("REDIS_URL"):
        return str(settings.get("REDIS_URL"))
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT") or 6379
    return f"redis://{host}:{port}/0"


def redis_params_from_settings(settings: Any) -> dict[str, Any]:
    """Keyword arguments for the Redis client: ``SIMHASH_REDIS_PARAMS`` (a dict, or JSON text on
    the command line) over scrapy-redis's ``REDIS_PARAMS`` when the index falls back to scrapy-redis's
    Redis. scrapy-redis's ``redis_cls`` (a client class path) is not a client argument and is left out."""
    params: dict[str, Any] = {}
    if not settings.get("SIMHASH_INDEX_URL") and _uses_scrapy_redis(settings) and settings.get("REDIS_PARAMS"):
        params.update(settings.getdict("REDIS_PARAMS"))
        params.pop("redis_cls", None)
    if settings.get("SIMHASH_REDIS_PARAMS"):
        params.update(settings.getdict("SIMHASH_REDIS_PARAMS"))
    return params
