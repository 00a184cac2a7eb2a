"""Every ``SIMHASH_*`` setting described once, and the one place Scrapy settings are read.

Each :class:`Setting` of :data:`SETTINGS` gives its name, its default (the value in
:mod:`.defaults`), how its value is read from Scrapy settings, and what it feeds: a keyword of
:meth:`~scrapy_simhash.Deduplicator.open` (``engine``), an entry of its ``index_options``
(``index_option``), the default of a command-line option (``flag``, the argparse dest), or only
the pipeline. From that table come the pipeline's engine options (:func:`engine_options`), the
option defaults of ``scrapy simhash`` (:func:`cli_defaults`) and of ``scrapy-simhash``
(:data:`BUILTIN_CLI_DEFAULTS`), the per-spider overrides (:func:`effective_settings`) and the
README's settings table (``tests/test_settings_doc.py``).

scrapy-redis's ``REDIS_*`` settings are read here too (:func:`index_url_from_settings`,
:func:`redis_params_from_settings`): the index package knows nothing of Scrapy.

Nothing is imported from Scrapy at import time: the command line reads :data:`BUILTIN_CLI_DEFAULTS`
and must start fast without it.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import defaults as D

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.settings import BaseSettings, Settings


# Readers: how one setting's value is read (``settings`` is a Scrapy BaseSettings).


def _raw(settings: BaseSettings, name: str) -> Any:
    return settings.get(name)


def _bool(settings: BaseSettings, name: str) -> bool:
    return settings.getbool(name)


def _int(settings: BaseSettings, name: str) -> int:
    return settings.getint(name)


def _float(settings: BaseSettings, name: str) -> float:
    return settings.getfloat(name)


def _list(settings: BaseSettings, name: str) -> list[Any]:
    return settings.getlist(name)


def _field_names(settings: BaseSettings, name: str) -> list[str]:
    """Item field names: a list, or one comma-separated string."""
    value = settings.get(name)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value or ()]


def _optional_float(settings: BaseSettings, name: str) -> float | None:
    """A number of days, or None for "never" (unset, empty, 0 or "none")."""
    value = settings.get(name)
    if value in (None, "", "0", 0, "none", "None"):
        return None
    return float(value)


def _share(settings: BaseSettings, name: str) -> float | None:
    """A share in (0, 1], or None for "no cap" (empty, 0 or "none")."""
    value = settings.get(name)
    if value in (None, "", "0", 0, "none", "None"):
        return None
    return float(value)


def _auto_bool(settings: BaseSettings, name: str) -> bool | None:
    """True, False, or None for "decide per item" (unset, empty or "auto")."""
    value = settings.get(name)
    if value in (None, "", "auto", "None", "none"):
        return None
    return settings.getbool(name)


def _workers(settings: BaseSettings, name: str) -> int:
    """A number of worker processes; unset, empty or "auto": the cores this process may use, minus one
    for the crawl itself, at least one."""
    if settings.get(name) not in (None, "", "auto"):
        return settings.getint(name)
    cores = os.process_cpu_count() if hasattr(os, "process_cpu_count") else (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    return max(1, (cores or 1) - 1)


def _index_url(settings: BaseSettings, name: str) -> str:
    return index_url_from_settings(settings) or default_index_url()


def _upper(settings: BaseSettings, name: str) -> Any:
    value = settings.get(name)
    return value.upper() if isinstance(value, str) else value


def _lower(settings: BaseSettings, name: str) -> Any:
    value = settings.get(name)
    return value.lower() if isinstance(value, str) else value


def _redis_params(settings: BaseSettings, name: str) -> dict[str, Any]:
    return redis_params_from_settings(settings)


# Checks: is a value (as read) one the plugin can run with?

ACTIONS = ("drop", "flag")
ON_INDEX_ERROR_CHOICES = ("drop", "pass", "close")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _natural(value: int) -> bool:
    return value >= 0


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _names(value: list[str]) -> bool:
    return bool(value) and all(value)


def _is_index_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    from .index import sqlite_path

    try:
        return sqlite_path(value) is not None or value.split("://", 1)[0].lower() in ("redis", "rediss", "unix")
    except Exception:  # IndexOpenError: sqlite:// without a path
        return False


def _optional_file(value: Any) -> bool:
    return value in (None, "") or (isinstance(value, (str, os.PathLike)) and os.path.isfile(value))


def _stop_words(value: Any) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(isinstance(w, str) for w in value)
    return _optional_file(value)


def _regexes(value: list[Any]) -> bool:
    try:
        for pattern in value:
            re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True


@dataclass(frozen=True)
class Setting:
    """One ``SIMHASH_*`` setting: its default, how it is read, what it feeds."""

    name: str
    default: Any
    read: Callable[[BaseSettings, str], Any] = _raw
    engine: str | None = None  #: keyword of Deduplicator.open
    index_option: str | None = None  #: key of Deduplicator.open's index_options
    flag: str | None = None  #: command-line option (argparse dest) whose default it is
    per_spider: bool = False  #: a spider attribute ``simhash_<name>`` overrides it
    #: What values are allowed, said to a user whose value is not (with ``valid``, which tests one).
    allowed: str = ""
    valid: Callable[[Any], bool] | None = None


#: Every setting, in the README's order.
SETTINGS: tuple[Setting, ...] = (
    Setting("SIMHASH_ENABLED", D.ENABLED, _bool, per_spider=True,
            allowed="True or False"),
    Setting("SIMHASH_INDEX_URL", D.INDEX_URL, _index_url, flag="index",
            allowed="None (the project's .scrapy/simhash/index.sqlite3), a path, or a sqlite:///, redis://, "
            "rediss:// or unix:// URL", valid=_is_index_url),
    Setting("SIMHASH_NAMESPACE", D.NAMESPACE, engine="namespace", flag="namespace", per_spider=True,
            allowed="a non-empty string", valid=_nonempty_str),
    Setting("SIMHASH_TITLE_FIELD", D.TITLE_FIELD, _field_names, flag="title_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=_names),
    Setting("SIMHASH_BODY_FIELD", D.BODY_FIELD, _field_names, flag="body_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=_names),
    Setting("SIMHASH_URL_FIELD", D.URL_FIELD, _field_names, flag="url_field", per_spider=True,
            allowed="an item field name, a list of them or a comma-separated string", valid=_names),
    Setting("SIMHASH_TITLE_MAX_DISTANCE", D.TITLE_MAX_DISTANCE, _int, engine="title_max_distance",
            flag="title_max_distance",
            allowed="an integer from 0 to SIMHASH_BITS - 1 (bits of difference)", valid=_natural),
    Setting("SIMHASH_BODY_MAX_DISTANCE", D.BODY_MAX_DISTANCE, _int, engine="body_max_distance",
            flag="body_max_distance",
            allowed="an integer from 0 to SIMHASH_BITS - 1 (bits of difference)", valid=_natural),
    Setting("SIMHASH_BITS", D.BITS, _int, engine="bits", flag="bits",
            allowed="32, 64 or 128", valid=lambda v: v in (32, 64, 128)),
    Setting("SIMHASH_TOP_K", D.TOP_K, _int, engine="top_k", flag="top_k",
            allowed="a positive integer", valid=lambda v: v >= 1),
    Setting("SIMHASH_MAX_SHARE", D.MAX_SHARE, _share, engine="max_share", flag="max_share",
            allowed="None or 0 (no cap), or a share greater than 0 and at most 1",
            valid=lambda v: v is None or 0 < v <= 1),
    Setting("SIMHASH_TITLE_ACTION", D.TITLE_ACTION, engine="title_action", flag="title_action", per_spider=True,
            allowed='"drop" or "flag"', valid=lambda v: v in ACTIONS),
    Setting("SIMHASH_BODY_ACTION", D.BODY_ACTION, engine="body_action", flag="body_action", per_spider=True,
            allowed='"drop" or "flag"', valid=lambda v: v in ACTIONS),
    Setting("SIMHASH_FLAG_FIELD", D.FLAG_FIELD,
            allowed="a non-empty string (an item field name)", valid=_nonempty_str),
    Setting("SIMHASH_TTL_DAYS", D.TTL_DAYS, _optional_float, engine="ttl_days", flag="ttl_days", per_spider=True,
            allowed="None (never expire) or a positive number of days", valid=lambda v: v is None or v > 0),
    Setting("SIMHASH_RESET", D.RESET, _bool, engine="reset", per_spider=True,
            allowed="True or False"),
    Setting("SIMHASH_DROP_LOG_LEVEL", D.DROP_LOG_LEVEL, _upper,
            allowed="DEBUG, INFO, WARNING, ERROR or CRITICAL", valid=lambda v: v in LOG_LEVELS),
    Setting("SIMHASH_USER_DICT", D.USER_DICT, engine="user_dict", flag="user_dict",
            allowed="None or the path of an existing file", valid=_optional_file),
    Setting("SIMHASH_STOP_WORDS", D.STOP_WORDS, engine="stop_words", flag="stop_words",
            allowed="None, the path of an existing file, or a list of words", valid=_stop_words),
    Setting("SIMHASH_DYNAMIC_THRESHOLD", D.DYNAMIC_THRESHOLD, _bool, engine="dynamic_threshold",
            flag="dynamic_threshold",
            allowed="True or False"),
    Setting("SIMHASH_TITLE_PATTERNS", D.TITLE_PATTERNS, _list, engine="title_patterns", flag="title_pattern",
            allowed="a list of regular expressions", valid=_regexes),
    Setting("SIMHASH_MAIN_CONTENT", D.MAIN_CONTENT, _auto_bool, engine="main_content", flag="main_content",
            allowed='None or "auto" (whole pages only), True (every HTML body) or False (none)'),
    Setting("SIMHASH_SKIP_FIELD", D.SKIP_FIELD,
            allowed='an item field name, or None/"" for no per-item opt-out',
            valid=lambda v: v is None or isinstance(v, str)),
    Setting("SIMHASH_ON_INDEX_ERROR", D.ON_INDEX_ERROR, _lower,
            allowed='"drop", "pass" or "close"', valid=lambda v: v in ON_INDEX_ERROR_CHOICES),
    Setting("SIMHASH_INDEX_RETRIES", D.INDEX_RETRIES, _int,
            allowed="an integer >= 0", valid=_natural),
    Setting("SIMHASH_INDEX_RETRY_DELAY", D.INDEX_RETRY_DELAY, _float,
            allowed="a number of seconds >= 0", valid=lambda v: v >= 0),
    Setting("SIMHASH_BUSY_TIMEOUT", D.BUSY_TIMEOUT, _float, index_option="busy_timeout",
            allowed="a number of seconds >= 0", valid=lambda v: v >= 0),
    Setting("SIMHASH_TITLE_NUMBERS", D.TITLE_NUMBERS, _int, engine="title_numbers", flag="title_numbers",
            allowed="a percentage from 0 (off) to 100", valid=lambda v: 0 <= v <= 100),
    Setting("SIMHASH_SENTENCES_SHARED", D.SENTENCES_SHARED, _int, engine="sentences_shared",
            flag="sentences_shared",
            allowed="a percentage from 0 (off) to 99", valid=lambda v: 0 <= v <= 99),
    Setting("SIMHASH_REDIS_PARAMS", D.REDIS_PARAMS, _redis_params, index_option="redis_params",
            allowed="a dict (JSON object on the command line) of Redis client arguments",
            valid=lambda v: isinstance(v, dict)),
    Setting("SIMHASH_WORKERS", D.WORKERS, _workers,
            allowed="None (the cores there are, minus one), 0 (no worker processes) or a number of them",
            valid=_natural),
    Setting("SIMHASH_SUMMARY", D.SUMMARY, _bool, allowed="True or False"),
    Setting("SIMHASH_MAX_LINE_BYTES", D.MAX_LINE_BYTES, _int, flag="max_line_bytes",
            allowed="a positive number of bytes", valid=lambda v: v >= 1),
    Setting("SIMHASH_REDIS_UNSAFE", D.REDIS_UNSAFE, index_option="redis_unsafe", flag="redis_unsafe",
            allowed="'refuse' or 'warn'", valid=lambda v: v in ("refuse", "warn")),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: Setting name → default.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
#: Settings a spider may override with an attribute or ``-a simhash_<name>=...``.
PER_SPIDER: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.per_spider)
#: Command-line option defaults of ``scrapy-simhash`` (outside a project): the built-in defaults.
BUILTIN_CLI_DEFAULTS: dict[str, Any] = {s.flag: s.default for s in SETTINGS if s.flag}


def value(settings: BaseSettings, name: str) -> Any:
    """The value of setting ``name``, read as the table says (``settings`` from :func:`effective_settings`)."""
    return BY_NAME[name].read(settings, name)


class SettingError(ValueError):
    """A ``SIMHASH_*`` setting whose value the plugin cannot run with; the message names the
    setting, its value and what is allowed."""

    def __init__(self, name: str, raw: Any, allowed: str) -> None:
        super().__init__(f"{name} = {raw!r} is not allowed: {allowed}")
        self.name = name


def check_settings(settings: BaseSettings) -> None:
    """Read every setting of ``settings`` (from :func:`effective_settings`) as the table says and
    raise :class:`SettingError` for the first one that cannot be read or is not allowed."""
    for s in SETTINGS:
        raw = settings.get(s.name)
        reader = _raw if s.name == "SIMHASH_INDEX_URL" else s.read  # no default path: it is not a choice
        try:
            read = reader(settings, s.name)
            ok = s.valid is None or (read is None and s.name == "SIMHASH_INDEX_URL") or s.valid(read)
        except (TypeError, ValueError) as exc:
            raise SettingError(s.name, raw, s.allowed or str(exc)) from exc
        if not ok:
            raise SettingError(s.name, raw, s.allowed)
    bits = value(settings, "SIMHASH_BITS")
    for name in ("SIMHASH_TITLE_MAX_DISTANCE", "SIMHASH_BODY_MAX_DISTANCE"):
        if value(settings, name) >= bits:
            raise SettingError(name, settings.get(name), f"an integer from 0 to SIMHASH_BITS - 1 ({bits - 1})")


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
    return merged


def engine_options(settings: BaseSettings) -> dict[str, Any]:
    """Keyword arguments of :meth:`~scrapy_simhash.Deduplicator.open` (all but the index URL)."""
    options: dict[str, Any] = {s.engine: s.read(settings, s.name) for s in SETTINGS if s.engine}
    options["index_options"] = {s.index_option: s.read(settings, s.name) for s in SETTINGS if s.index_option}
    return options


def cli_defaults(settings: BaseSettings) -> dict[str, Any]:
    """Command-line option defaults (option dest → value) from a project's settings (``scrapy simhash``)."""
    s = effective_settings(settings, None)
    return {st.flag: st.read(s, st.name) for st in SETTINGS if st.flag}


def default_index_url() -> str:
    """``sqlite:///<project>/.scrapy/simhash/index.sqlite3`` (``./.scrapy/…`` outside a project).
    Nothing is created here: the index makes its directory when it makes its file, so a read-only
    command run elsewhere leaves no ``.scrapy/`` behind."""
    from scrapy.utils.project import data_path

    directory = Path(data_path("simhash", createdir=False)).resolve()
    return f"sqlite:///{directory / D.INDEX_FILENAME}"


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
