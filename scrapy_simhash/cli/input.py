"""What ``dedup`` and ``import`` read: JSON lines or one JSON array, gzip-compressed or not.

Scrapy's feed exports write JSON lines (``-o items.jl``) and JSON arrays (``-O items.json``); both
are read as a stream of items, never whole: a line longer than ``--max-line-bytes`` is counted and
skipped without being held, an array's elements are parsed one at a time.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .common import GZIP_MAGIC, CliError, describe

#: Bytes of the input looked at to tell a JSON array from JSON lines (and buffered while reading).
PEEK = 1 << 20
#: Bytes read at a time from a JSON array.
CHUNK = 1 << 16
BOM = b"\xef\xbb\xbf"
_SPACE = re.compile(r"[ \t\n\r]*")


class Input:
    """A JSON-lines source: a file or stdin, gzip-compressed or not (detected by its magic bytes).

    ``position``/``size`` give progress for regular files (compressed bytes read / file size).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.size: int | None = None
        self._raw: Any = None
        try:
            if name == "-":
                raw: Any = sys.stdin.buffer
                raw = io.BufferedReader(raw.raw, buffer_size=PEEK) if hasattr(raw, "raw") else raw
            else:
                path = Path(name)
                if path.is_dir():
                    raise CliError(f"cannot read {name}: is a directory")
                raw = open(path, "rb", buffering=PEEK)  # noqa: SIM115 (closed by close())
                if path.is_file():
                    self.size = path.stat().st_size
            buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw, buffer_size=PEEK)
            magic = buffered.peek(3)[:3]
        except CliError:
            raise
        except OSError as exc:
            raise CliError(f"cannot read {name}: {exc.strerror or exc}") from exc
        self._raw = raw
        # gzip: its magic and deflate, the one compression method gzip has (a JSON-lines file whose
        # first bytes happen to be the magic is read as lines, its bad lines counted).
        self.compressed = magic == GZIP_MAGIC + b"\x08" or (magic[:2] == GZIP_MAGIC and name.endswith(".gz"))
        if self.compressed:
            # (not buffered further: a read past the cut of a truncated file loses what it had read)
            unzipped = gzip.GzipFile(fileobj=buffered, mode="rb")
            self.stream: IO[bytes] = unzipped  # type: ignore[assignment]
            try:
                unzipped.peek(1)  # a broken header fails here, before any line is read
            except (OSError, EOFError, zlib.error) as exc:
                raise CliError(f"cannot read {name}: not valid gzip data ({exc})") from exc
        elif name.endswith(".gz") and magic:
            raise CliError(f"cannot read {name}: the name ends in .gz but the data is not gzip-compressed")
        else:
            self.stream = buffered

    @property
    def position(self) -> int:
        try:
            return int(self._raw.tell()) if self.size is not None else 0
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        if self._raw is not None and self._raw is not sys.stdin.buffer:
            self._raw.close()


class Reader:
    """Numbered raw items of the input.

    The input is JSON lines (what ``scrapy crawl -o items.jl`` writes) or, when its first character
    is ``[``, one JSON array (``-o items.json``), whose elements are streamed: neither is read into
    memory whole. ``format`` says which. A UTF-8 BOM at the start is ignored.

    Blank lines (ASCII whitespace only) are not items: they are passed over here and counted
    (``blank``), so that a flood of them costs a read, not a decision each; the numbers of the lines
    yielded stay their line numbers. ``lines`` is the number of the last line read.

    A line longer than ``max_bytes`` is never held whole: it is read past in 1 MiB pieces and
    yields a message (a ``str``) instead of its bytes, so it is counted and skipped with its number.
    An array element longer than that ends the reading (the array's end cannot be found without
    parsing the element): memory stays within about ``max_bytes`` characters either way.

    Read errors in the middle of the input (a truncated gzip, a broken array) end the iteration and
    are kept in ``error``: they must not surface in a pool's feeder thread.
    """

    def __init__(self, source: Input, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.error: str | None = None
        self.lines = 0
        self.blank = 0
        self.format = "JSON lines"

    def __iter__(self) -> Iterator[tuple[int, bytes | str]]:
        stream = self.source.stream
        try:
            head = stream.peek(PEEK).removeprefix(BOM).lstrip()  # type: ignore[attr-defined]
        except (OSError, EOFError, zlib.error) as exc:
            self.error = f"input broke off before the first item: {describe(exc)}"
            return
        first, _, rest = head.partition(b"\n")
        shape = _json_shape(first) if head[:1] == b"[" else "lines"
        array = shape == "part" or (shape == "whole" and not rest.strip())
        yield from self._array(stream) if array else self._lines(stream)

    def _lines(self, stream: IO[bytes]) -> Iterator[tuple[int, bytes | str]]:
        n = 0
        readline = stream.readline
        limit = self.max_bytes + 1
        while True:
            try:
                raw = readline(limit)
                if len(raw) > self.max_bytes and not raw.endswith(b"\n"):
                    size = len(raw)
                    while raw and not raw.endswith(b"\n"):
                        raw = readline(1 << 20)
                        size += len(raw)
                    n += 1
                    self.lines = n
                    yield n, f"{size:,} bytes, longer than --max-line-bytes ({self.max_bytes:,})"
                    continue
            except (OSError, EOFError, zlib.error) as exc:
                self.error = f"input broke off after line {n}: {describe(exc)}"
                return
            if not raw:
                return
            n += 1
            if n == 1:
                raw = raw.removeprefix(BOM)
            if raw.isspace():
                try:
                    more = _skip_blank(stream)
                except (OSError, EOFError, zlib.error) as exc:
                    self.error = f"input broke off after line {n}: {describe(exc)}"
                    return
                n += more
                self.blank += 1 + more
                self.lines = n
                continue
            self.lines = n
            yield n, raw

    def _array(self, stream: IO[bytes]) -> Iterator[tuple[int, bytes | str]]:
        """The elements of a JSON array, each as its JSON text, found with ``raw_decode`` over a
        buffer that grows only as much as the current element needs."""
        self.format = "a JSON array"
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        scanner = json.JSONDecoder()
        buf, pos, eof, n = "", 0, False, 0

        def more(size: int) -> None:
            nonlocal buf, pos, eof
            buf, pos = buf[pos:], 0
            data = stream.read(size)
            eof = not data
            buf += decoder.decode(data, final=eof)

        def skip_space() -> str:
            nonlocal pos
            while True:
                pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
                if pos < len(buf) or eof:
                    return buf[pos:pos + 1]
                more(CHUNK)

        try:
            skip_space()
            pos += 1  # the "["
            while (char := skip_space()) != "]":
                if n:
                    if char != ",":
                        self.error = f"broken JSON array after item {n}: ',' or ']' expected"
                        return
                    pos += 1
                    skip_space()
                while True:  # the element: read until it parses and is followed by something
                    try:
                        _, end = scanner.raw_decode(buf, pos)
                        if end < len(buf) or eof:
                            break
                    except json.JSONDecodeError as exc:
                        if eof:
                            self.error = f"broken JSON array at item {n + 1}: {exc.msg}"
                            return
                    if len(buf) - pos > self.max_bytes:
                        self.error = (f"item {n + 1} of the JSON array is longer than --max-line-bytes "
                                      f"({self.max_bytes:,}): the rest of the array is not read")
                        return
                    more(max(CHUNK, len(buf) - pos))  # doubling: each element is parsed O(1) times
                n += 1
                self.lines = n
                yield n, buf[pos:end].encode("utf-8", "surrogatepass")
                pos = end
            pos += 1  # the "]"
            if skip_space():
                self.error = f"unexpected data after the JSON array's {n} items"
        except UnicodeDecodeError as exc:
            self.error = f"not UTF-8 after item {n} ({exc.reason})"
        except RecursionError:
            self.error = f"item {n + 1} of the JSON array is nested too deeply to read"
        except (OSError, EOFError, zlib.error) as exc:
            self.error = f"input broke off after item {n}: {describe(exc)}"


def _skip_blank(stream: IO[bytes]) -> int:
    """Pass over the whole blank lines at ``stream``'s position a buffer at a time (not a line at a
    time: a small gzip file can hold millions of them); returns how many."""
    peek = getattr(stream, "peek", None)
    skipped = 0
    while peek is not None:
        buf = peek(CHUNK)
        rest = buf.lstrip(b" \t\r\n\x0b\x0c")
        end = buf.rfind(b"\n", 0, len(buf) - len(rest)) + 1  # the blank lines end at the run's last newline
        if not end:
            break
        stream.read(end)
        skipped += buf.count(b"\n", 0, end)
        if rest:
            break
    return skipped


def _json_shape(line: bytes) -> str:
    """What an input's first line, starting with "[", says: ``"part"`` of a JSON array over several
    lines (Scrapy writes "[" alone on the first line), a ``"whole"`` JSON value (one item a line, or
    a whole array on a single line), or ``"lines"`` (too deeply nested to tell: read as lines, the
    line a counted bad one)."""
    try:
        json.loads(line)
    except RecursionError:
        return "lines"
    except ValueError:
        return "part"
    return "whole"


