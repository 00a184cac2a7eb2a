"""What the pipeline adds for short texts (``SIMHASH_PROFILE = "short"``): spam patterns, the
per-author check and the short profile's own stats.

* :class:`SpamPatterns`: a user's file of phrases and ``re:`` regular expressions
  (``SIMHASH_SPAM_PATTERNS``); phrases are found in the text's character key (no spaces,
  punctuation or symbols, lower case: "加 微-信" is "加微信"), so inserting symbols does not dodge them.
* :class:`AuthorWindow`: the last items of each author (``SIMHASH_AUTHOR_FIELD``) within
  ``SIMHASH_AUTHOR_WINDOW`` seconds, in this process's memory; a new item of that author whose
  text is at least :data:`AUTHOR_MIN_SIMILARITY` like one of them is a repeat, a lower bar than
  the index's (:data:`~scrapy_simhash.text.similarity.MIN_SIMILARITY`): one account posting
  the same comment reworded is flooding, where two accounts writing alike may not be
  (docs/decisions/0532-spam-and-authors.md).
* :class:`PrefixedStats`: the short profile's stats under ``simhash/short/``.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..settings import SettingError
from ..text.similarity import char_key, same_text
from .drops import SimhashDrop

#: The character similarity at or above which an author's consecutive items are one comment
#: (docs/decisions/0532-spam-and-authors.md).
AUTHOR_MIN_SIMILARITY = 0.6
#: Items kept per author (the most recent ones within the window).
AUTHOR_KEPT = 8
#: Authors kept at most (the least recently seen go first): memory stays bounded on a long crawl.
AUTHORS_MAX = 100_000


class SpamDrop(SimhashDrop):
    """Raised for an item that matches a spam pattern when ``SIMHASH_SPAM_ACTION = "drop"``."""


class AuthorRepeat(SimhashDrop):
    """Raised for an item whose author posted a text this alike within ``SIMHASH_AUTHOR_WINDOW``."""


class SpamPatterns:
    """The patterns of a ``SIMHASH_SPAM_PATTERNS`` file; a bad regular expression is a ValueError
    naming its line."""

    def __init__(self, path: str | Path) -> None:
        self.phrases: list[str] = []
        self.regexes: list[re.Pattern[str]] = []
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("re:"):
                try:
                    self.regexes.append(re.compile(line[3:].strip()))
                except re.error as exc:
                    raise ValueError(f"{path}, line {number}: not a regular expression ({exc})") from None
            else:
                key = char_key(line, limit=10**6) or "".join(re.findall(r"\w", line.lower()))
                if key:
                    self.phrases.append(key)

    def match(self, text: str) -> str | None:
        """The first pattern found in ``text`` (a normalized text), as written in the file, or None."""
        key = char_key(text, limit=10**9) or ""
        for phrase in self.phrases:
            if phrase in key:
                return phrase
        for regex in self.regexes:
            if regex.search(text):
                return f"re:{regex.pattern}"
        return None


class AuthorWindow:
    """The recent items of each author, to check a new one against (see the module docstring)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._recent: dict[str, deque[tuple[float, str]]] = {}

    def repeat(self, author: str, text: str, now: float | None = None) -> float | None:
        """The similarity of ``text`` (normalized) to the author's alike item within the window (a
        repeat), else None; the item is remembered either way."""
        now = time.time() if now is None else now
        key = char_key(text)
        recent = self._recent.pop(author, None) or deque(maxlen=AUTHOR_KEPT)
        self._recent[author] = recent  # most recently seen last
        if len(self._recent) > AUTHORS_MAX:
            del self._recent[next(iter(self._recent))]
        while recent and recent[0][0] < now - self.window:
            recent.popleft()
        found = None
        if key is not None:
            for _, earlier in recent:
                same, score = same_text(key, earlier, AUTHOR_MIN_SIMILARITY)
                if same:
                    found = score if found is None else max(found, score)
            recent.append((now, key))
        return found


def spam_patterns(path: str | None) -> SpamPatterns | None:
    """The patterns of ``SIMHASH_SPAM_PATTERNS`` (None: none); a file that cannot be read or holds a
    bad regular expression is a :class:`~scrapy_simhash.settings.SettingError` naming the setting."""
    if not path:
        return None
    try:
        return SpamPatterns(path)
    except (OSError, ValueError) as exc:
        raise SettingError("SIMHASH_SPAM_PATTERNS", path, f"a readable file of phrases and re: lines ({exc})") from exc


SHORT_STATS = "simhash/short/"


def own_key(stats: Mapping[str, Any], key: str) -> str:
    """A ``simhash/…`` stat as this crawl's pipeline counted it: under :data:`SHORT_STATS` when it ran
    the short profile (for readers of the stats: the summary, the runs' history, the monitors)."""
    if key.startswith("simhash/") and "simhash/index" not in stats and SHORT_STATS + "index" in stats:
        return SHORT_STATS + key[len("simhash/"):]
    return key


class PrefixedStats:
    """A stats collector whose ``simhash/…`` keys go under ``simhash/short/…``."""

    def __init__(self, stats: Any, prefix: str = SHORT_STATS) -> None:
        self._stats, self._prefix = stats, prefix

    def _key(self, key: str) -> str:
        return self._prefix + key[len("simhash/"):] if key.startswith("simhash/") else key

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self._stats.inc_value(self._key(key), count, start)

    def set_value(self, key: str, value: Any) -> None:
        self._stats.set_value(self._key(key), value)

    def get_value(self, key: str, default: Any = None) -> Any:
        return self._stats.get_value(self._key(key), default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stats, name)


def screen(text: str, url: str | None, author: Any, spam: SpamPatterns | None, spam_action: str,
           authors: AuthorWindow | None, stats: Any, log_level: str | None) -> dict[str, Any] | None:
    """An item's spam and per-author checks, before the index (an item they drop is not added to it):
    raises :class:`SpamDrop` or :class:`AuthorRepeat`; returns the flag field's value for a spam item
    to flag (``SIMHASH_SPAM_ACTION = "flag"``), else None."""
    flag = None
    if spam is not None and text:
        pattern = spam.match(text)
        if pattern is not None:
            stats.inc_value("simhash/spam")
            if spam_action == "drop":
                stats.inc_value("simhash/dropped/spam")
                raise SpamDrop(f"spam {url or '(no URL)'}: pattern {pattern!r}", log_level=log_level)
            if spam_action == "flag":
                flag = {"status": "spam", "pattern": pattern}
    if authors is not None and text and author not in (None, ""):
        score = authors.repeat(str(author), text)
        if score is not None:
            stats.inc_value("simhash/dropped/author")
            raise AuthorRepeat(f"repeat by author {str(author)[:80]!r} {url or '(no URL)'}: characters "
                               f"{score:.2f} within {authors.window:g} s", log_level=log_level)
    return flag
