"""What a setting's value becomes and which values are allowed: the converters and checks that
:data:`scrapy_simhash.settings.SETTINGS` names for each setting.

Converters take a raw value (as a project writes it, ``-s NAME=text``, or command-line text) to the
value the plugin runs with. The same functions read Scrapy settings and the command line's options,
and give what Scrapy's ``getbool``/``getint``/``getfloat``/``getlist``/``getdict`` give (a None value
reads as their defaults), without importing Scrapy.

Checks say whether a value (as converted) is one the plugin can run with. A value of another type is
not: a check may raise TypeError or ValueError for it (``Setting.allows`` turns that into "not
allowed").
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from typing import Any


def as_is(value: Any) -> Any:
    return value


def as_bool(value: Any) -> bool:
    if value is None:
        return False
    try:
        return bool(int(value))
    except ValueError:
        if value in ("True", "true"):
            return True
        if value in ("False", "false"):
            return False
        raise ValueError("Supported values for boolean settings are 0/1, True/False, '0'/'1', 'True'/'False' "
                         "and 'true'/'false'") from None


def as_int(value: Any) -> int:
    """An integer; a float with a fraction is refused, from a settings file as from ``-s`` (where
    ``int("2.5")`` fails), instead of being cut to the integer below."""
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not an integer")
    return int(0 if value is None else value)


def as_float(value: Any) -> float:
    return float(0.0 if value is None else value)


def as_list(value: Any) -> list[Any]:
    if not value:
        return []
    return list(value.split(",") if isinstance(value, str) else value)


def as_dict(value: Any) -> dict[Any, Any]:
    """A dict, or JSON text of one (the command line's ``-s NAME='{...}'``)."""
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value or {})


def as_field_names(value: Any) -> list[str]:
    """Item field names: a list, or one comma-separated string."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value or ()]


_NONE = (None, "", "none", "None")


def as_float_or_none(value: Any) -> float | None:
    """A number, or None for "off" (unset, empty, 0 or "none"): no expiry, no cap."""
    return None if value in _NONE else (float(value) or None)


def as_int_or_none(value: Any) -> int | None:
    """A whole number, or None (unset, empty or "none") for the default the setting computes."""
    return None if value in _NONE else as_int(value)


def as_auto_bool(value: Any) -> bool | None:
    """True, False, or None for "decide per item" (unset, empty or "auto")."""
    return None if value in (*_NONE, "auto") else as_bool(value)


def as_workers(value: Any) -> int:
    """A number of worker processes; unset, empty or "auto": the cores this process may use, minus one
    for the crawl itself, at least one."""
    if value not in (None, "", "auto"):
        return as_int(value)
    cores = os.process_cpu_count() if hasattr(os, "process_cpu_count") else (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    return max(1, (cores or 1) - 1)


def as_upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def as_lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


ACTIONS = ("drop", "flag")
ON_INDEX_ERROR_CHOICES = ("drop", "pass", "close")
PROFILES = ("news", "short")  # fingerprint.fingerprinter.PROFILES
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
BITS_CHOICES = (32, 64, 128)
REDIS_UNSAFE_CHOICES = ("refuse", "warn")


def int_from(low: int, high: float = math.inf) -> Callable[[Any], bool]:
    """An integer from ``low`` to ``high``."""
    return lambda value: isinstance(value, int) and low <= value <= high


def number_from(low: float) -> Callable[[Any], bool]:
    """A number >= ``low``."""
    return lambda value: isinstance(value, (int, float)) and low <= value


def number_between(low: float, high: float) -> Callable[[Any], bool]:
    """A number from ``low`` to ``high``."""
    return lambda value: isinstance(value, (int, float)) and low <= value <= high


def number_above(low: float) -> Callable[[Any], bool]:
    """A finite number > ``low``."""
    return lambda value: isinstance(value, (int, float)) and low < value < math.inf


def one_of(choices: tuple[Any, ...]) -> Callable[[Any], bool]:
    return lambda value: value in choices


def valid_nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def valid_names(value: list[str]) -> bool:
    return bool(value) and all(value)


def valid_index_url(value: Any) -> bool:
    if value is None:  # the project's default file
        return True
    if not isinstance(value, str):
        return False
    from .index import sqlite_path

    try:
        return sqlite_path(value) is not None or value.split("://", 1)[0].lower() in ("redis", "rediss", "unix")
    except Exception:  # IndexOpenError: sqlite:// without a path
        return False


def valid_optional_file(value: Any) -> bool:
    return value in (None, "") or (isinstance(value, (str, os.PathLike)) and os.path.isfile(value))


def valid_stop_words(value: Any) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(isinstance(w, str) for w in value)
    return valid_optional_file(value)


def valid_regexes(value: list[Any]) -> bool:
    try:
        for pattern in value:
            re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True


def valid_ttl(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and 0 < value < math.inf)


def valid_max_share(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and 0 < value <= 1)
