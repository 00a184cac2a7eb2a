"""One input line of ``dedup``/``import`` made into what the run decides on: decoded, parsed, its
fields picked and fingerprinted (:class:`LineWorker`, in the run's process or a ``--jobs`` worker).

A line that is not an item to decide (blank, or an object with neither a title nor a body) is
*skipped* with its reason: counted in the summary, without a decision line (see :mod:`.dedup`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .common import json_type, pick

if TYPE_CHECKING:
    from ..fingerprint.fingerprinter import Fingerprinter, Fingerprints


class LineResult(NamedTuple):
    """What a worker made of one input line (picklable: it crosses process boundaries)."""

    line: int
    url: str | None
    fps: Fingerprints | None  # None when the line is bad or skipped
    error: str | None  # why the line is bad
    skipped: str | None  # why the line is no item to decide (blank, no title or body)
    kept: str | None  # the item re-serialized, when kept items are written


@dataclass
class LineWorker:
    """Turns one raw line into a :class:`LineResult`: decode, parse, pick fields, fingerprint."""

    fingerprinter: Fingerprinter
    title_fields: Sequence[str]
    body_fields: Sequence[str]
    url_fields: Sequence[str]
    keep_json: bool

    def __post_init__(self) -> None:
        wanted = ", ".join(dict.fromkeys([*self.title_fields, *self.body_fields]))
        self._no_text = f"no title or body (looked for {wanted})"

    def __call__(self, numbered: tuple[int, bytes | str]) -> LineResult:
        n, raw = numbered
        if isinstance(raw, str):  # the reader's reason for not reading it (too long)
            return LineResult(n, None, None, raw, None, None)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return LineResult(n, None, None, f"not UTF-8 ({exc.reason} at byte {exc.start})", None, None)
        if not text.strip():  # (the reader passes over ASCII-blank lines: here, other whitespace)
            return LineResult(n, None, None, None, BLANK, None)
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            return LineResult(n, None, None, f"not JSON ({exc.msg} at column {exc.colno})", None, None)
        except RecursionError:
            return LineResult(n, None, None, "not JSON (nested too deeply)", None, None)
        if not isinstance(item, dict):
            return LineResult(n, None, None, f"not a JSON object but {json_type(item)}", None, None)
        url_name, url = pick(item, self.url_fields)
        if url is not None and not isinstance(url, str):
            return LineResult(n, None, None, f"field {url_name!r} must be a string, not {json_type(url)}",
                              None, None)
        title_name, title = pick(item, self.title_fields)
        body_name, body = pick(item, self.body_fields)
        if _empty(title) and _empty(body):
            return LineResult(n, url, None, None, self._no_text, None)
        for name, value in ((title_name, title), (body_name, body)):
            if value is None or isinstance(value, str):
                continue
            if name == body_name and isinstance(value, list) and all(isinstance(v, str) for v in value):
                continue  # a list of paragraphs
            expected = "a string or a list of strings" if name == body_name else "a string"
            return LineResult(n, url, None, f"field {name!r} must be {expected}, not {json_type(value)}",
                              None, None)
        try:
            fps = self.fingerprinter.fingerprint(title, body)
        except (TypeError, ValueError, UnicodeError, RecursionError) as exc:
            return LineResult(n, url, None, f"cannot fingerprint ({type(exc).__name__}: {exc})", None, None)
        kept = json_line(item) if self.keep_json else None
        return LineResult(n, url, fps, None, None, kept)


#: The reason of a blank line (one counted, not decided).
BLANK = "blank line"


def _empty(value: Any) -> bool:
    return value in (None, "", [], {})


def json_line(obj: Any) -> str:
    """One JSON line, readable UTF-8 where possible; ASCII escapes when the data holds lone
    surrogates (from ``\\ud800``-style escapes in the input), which UTF-8 cannot carry."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj)
    return text
