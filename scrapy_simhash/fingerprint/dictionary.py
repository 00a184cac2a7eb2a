"""jieba's prefix dictionary and IDF table, kept as table files that load without unmarshalling.

jieba keeps its prefix dictionary as a ``marshal`` file in the shared temporary directory (which
any local user can replace, and unmarshalling runs what it reads), and ``jieba.analyse`` parses
``idf.txt`` at every start. Here both tables are kept as one file each under the user's cache
directory (``$XDG_CACHE_HOME/scrapy-simhash`` or ``~/.cache/scrapy-simhash``): a JSON header line,
the words joined by newlines, then the numbers as one packed array. Loading is a split and an array
read; nothing in the file can run code, and a file that does not match its header is rebuilt. The
file name carries a hash of the source file's content, jieba's version and the byte order: a
changed dictionary never reads a stale table, and every virtualenv with the same jieba shares one
copy instead of adding its own. That hash is remembered by the source's identity and times
(:data:`DIGESTS`), so a start reads no source. Reading a table marks it used (its modification
time); writing one removes the tables of the same kind unused for :data:`STALE_DAYS` days, and
those of another naming (``kind-…``). Where no cache directory is writable, the tables are built
from the sources every time (correct, just slower). What each step saves at start-up:
docs/decisions/0202-table-cache.md.

The IDF table is kept otherwise (:class:`MappedTable`): its file is mapped, not parsed, and the
compiled engine looks words up in its bytes, so a start makes none of its 270,000 strings.

The compiled segmenter's route is kept as the prefix dictionary is (:func:`load_route`: its compact
tables as bytes after the words they cannot hold), so that a process cuts without building jieba's
prefix dict. The pure-Python engine cuts with jieba's own ``cut``, whose prefix dict
:func:`load_prefix_dict` fills from the table file.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import functools
import hashlib
import json
import logging
import mmap
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from .jieba_loader import jieba

logger = logging.getLogger(__name__)

#: The format of a table file, in its header: a file of another format is rebuilt.
FORMAT = "scrapy-simhash table 3"
#: A table of a kind not read for this many days goes when another of that kind is written.
STALE_DAYS = 30
#: The content hashes of the source files, by their identity and times (:func:`_digest`).
DIGESTS = "digests.json"


def cache_dir() -> Path:
    """Where the tables are kept (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "scrapy-simhash"


@functools.lru_cache(maxsize=8)
def _digest(source: Path, stat_key: tuple[int, ...]) -> str:
    """The content hash of a source file, once per process and version of the file; remembered in
    :data:`DIGESTS` by the file's identity and times (``stat_key``: device, inode, size, modification
    and change times in ns; an edit, a copy or a replacement changes them) and read back from there,
    so that a start hashes no source."""
    memo_path = cache_dir() / DIGESTS
    name = str(source)
    try:
        memo = json.loads(memo_path.read_bytes())
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    known = memo.get(name)
    if isinstance(known, list) and len(known) == 2 and known[0] == list(stat_key) and isinstance(known[1], str):
        return known[1]
    digest = hashlib.blake2b(digest_size=16)
    with open(source, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    memo[name] = [list(stat_key), digest.hexdigest()]
    with contextlib.suppress(OSError), _replacing(memo_path) as f:
        f.write(json.dumps(memo).encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[BinaryIO]:
    """A new file that replaces ``path`` whole once written (readers see the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _cache_file(kind: str, source: Path, layout: str = "") -> Path:
    st = source.stat()
    stat_key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    key = [FORMAT, kind, _digest(source, stat_key), jieba.__version__, sys.byteorder]
    if layout:  # tables of another layout of the same source live next to these
        key.append(layout)
    digest = hashlib.blake2b(json.dumps(key).encode(), digest_size=10).hexdigest()
    return cache_dir() / f"{kind}.{digest}.table"


def _remove_stale(kind: str, keep: Path) -> None:
    """Remove the other tables of ``kind`` unused for STALE_DAYS, and those of another naming (``kind-…``)."""
    cutoff = time.time() - STALE_DAYS * 86400
    for path in keep.parent.glob(f"{kind}[.-]*.table"):
        try:
            if path != keep and (path.name.startswith(f"{kind}-") or path.stat().st_mtime < cutoff):
                path.unlink()
        except OSError:
            pass


def _map(path: Path) -> Any:
    """The bytes of a cache file, mapped read-only (a cache file is only ever replaced whole, never
    written in place: no copy of its megabytes into this process), or read where it cannot be; None
    when it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty, or a file system that cannot map
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _read(path: Path, typecode: str) -> tuple[dict[str, int | float], dict[str, object], list[memoryview]] | None:
    """A table written by :func:`_write`: ``(table, header, blobs)`` (views of the file's bytes, not
    copies), None when absent or not ours."""
    data = _map(path)
    if data is None:
        return None
    try:
        head_end = data.find(b"\n")
        if head_end < 0:
            return None
        header = json.loads(data[:head_end])
        if header.get("format") != FORMAT or header.get("typecode") != typecode:
            return None
        n, words_bytes = int(header["count"]), int(header["words_bytes"])
        blob_sizes = [int(size) for size in header.get("blobs", ())]
        words = data[head_end + 1 : head_end + 1 + words_bytes].decode("utf-8").split("\n") if n else []
        at = head_end + 1 + words_bytes
        blobs_at = len(data) - sum(blob_sizes)
        if min(blob_sizes, default=0) < 0 or blobs_at < at:
            return None
        values = array.array(typecode)
        values.frombytes(data[at:blobs_at])
        blobs, view = [], memoryview(data)
        for size in blob_sizes:
            blobs.append(view[blobs_at : blobs_at + size])
            blobs_at += size
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return None
    if len(words) != n or len(values) != n:
        return None
    return dict(zip(words, values, strict=True)), header, blobs


def _write(path: Path, table: Mapping[str, int | float], typecode: str, extra: dict[str, object],
           blobs: Sequence[bytes] = ()) -> None:
    """``table`` (words, then their values packed), after a JSON header; then ``blobs``, as they are."""
    if any("\n" in word for word in table):
        return  # cannot be stored in this format; built from the source each time instead
    words = "\n".join(table).encode("utf-8")
    header = {"format": FORMAT, "typecode": typecode, "count": len(table), "words_bytes": len(words), **extra}
    if blobs:
        header["blobs"] = [len(blob) for blob in blobs]
    head = json.dumps(header).encode()
    if blobs:  # padded (JSON allows the spaces) so that the blobs start 16-byte aligned: used in place
        head += b" " * (-(len(head) + 1 + len(words) + len(table) * array.array(typecode).itemsize) % 16)
    _store(path, head + b"\n", words, array.array(typecode, table.values()).tobytes(), *blobs)


def _store(path: Path, *parts: bytes) -> bool:
    """Replace the cache file ``path`` with ``parts``; False (logged) where it cannot be written."""
    try:
        with _replacing(path) as f:
            for part in parts:
                f.write(part)
    except OSError as exc:
        logger.debug("scrapy-simhash could not cache a table in %s: %s", path.parent, exc)
        return False
    return True


def _used(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)  # used: not stale


def _cached(
    kind: str, source: Path, typecode: str, build: Callable[[], tuple[dict[str, int | float], dict[str, object]]],
) -> tuple[Mapping[str, int | float], dict[str, object]]:
    try:
        path = _cache_file(kind, source)
    except OSError:
        return build()
    loaded = _read(path, typecode)
    if loaded is not None:
        _used(path)
        return loaded[:2]
    table, extra = build()
    _write(path, table, typecode, extra)
    _remove_stale(kind, path)
    return table, extra


def _prefix_source(tokenizer: jieba.Tokenizer) -> Path:
    return Path(tokenizer.dictionary or Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME)


def _prefix_table(tokenizer: jieba.Tokenizer) -> tuple[dict[str, int | float], object]:
    """The prefix dictionary of the tokenizer's dictionary file and its total, from the cache."""

    def build() -> tuple[dict[str, int | float], dict[str, object]]:
        freq, total = tokenizer.gen_pfdict(tokenizer.get_dict_file())
        return freq, {"total": total}

    freq, extra = _cached("prefix-dict", _prefix_source(tokenizer), "q", build)
    return freq, extra.get("total")  # type: ignore[return-value]


def load_prefix_dict(tokenizer: jieba.Tokenizer) -> None:
    """Initialize a jieba tokenizer (``FREQ``, ``total``) from the cached prefix dictionary."""
    with tokenizer.lock:
        if tokenizer.initialized:
            return
        freq, total = _prefix_table(tokenizer)
        if not isinstance(total, int):
            type(tokenizer).initialize(tokenizer)  # a header we did not write: let jieba do it
            return
        tokenizer.FREQ, tokenizer.total = freq, total
        tokenizer.initialized = True


class CompiledRoute(Protocol):
    """What :func:`load_route` caches of a compiled route (``_segment_c.Router``)."""

    def unpacked(self) -> dict[str, int | float]: ...

    def tables(self) -> tuple[bytes, ...]: ...


_R = TypeVar("_R", bound=CompiledRoute)


def load_route(
    tokenizer: jieba.Tokenizer, layout: str,
    make: Callable[[Mapping[str, int | float], int, tuple[memoryview, ...] | None], _R],
) -> _R:
    """The compiled route of the tokenizer's dictionary file, without building its prefix dictionary
    (``FREQ``: 500,000 words): ``make(freq, total, None)`` builds a route from
    the whole dictionary, ``make(unpacked, total, tables)`` copies one from the tables it gave (its
    ``unpacked()`` words and ``tables()``), which are kept next to the prefix dictionary's, per
    ``layout``, and raises ``ValueError`` for tables that are not of that layout (the cached ones
    are then rebuilt). The tokenizer itself is left as it is."""
    source = _prefix_source(tokenizer)
    try:
        path = _cache_file("route", source, layout)
    except OSError:
        path = None
    loaded = _read(path, "q") if path is not None else None
    if loaded is not None:
        unpacked, header, blobs = loaded
        total = header.get("total")
        if isinstance(total, int) and header.get("layout") == layout:
            try:
                route = make(unpacked, total, tuple(blobs))
            except ValueError:
                pass
            else:
                _used(path)  # type: ignore[arg-type]
                return route
    freq, total = _prefix_table(tokenizer)
    if not isinstance(total, int):
        raise ValueError(f"no prefix dictionary of {source}")
    route = make(freq, total, None)
    if path is not None:
        _write(path, route.unpacked(), "q", {"total": total, "layout": layout}, route.tables())
        _remove_stale("route", path)
    return route


#: The layout of the IDF table's file (:func:`load_idf`), part of its name.
IDF_LAYOUT = "mapped 1"
#: 2^64 / golden ratio: the Fibonacci hashing of ``_packed._table_slot``.
_FIB = 11400714819323198485
_SLOT = 16  # bytes of a ``_packed.Slot``: its packed word (uint64), its index in the table (double)
_OFFSET_TYPE = next(code for code in "IL" if array.array(code).itemsize == 4)


def _pack(word: str) -> int:
    """``_packed._pack`` of a whole word: 1 to 4 BMP characters, none NUL, 16 bits each, first
    highest; 0 when it cannot be packed."""
    if not 0 < len(word) <= 4:
        return 0
    key = 0
    for char in word:
        code = ord(char)
        if code == 0 or code > 0xFFFF:
            return 0
        key = key << 16 | code
    return key


def _key_slots(words: Sequence[str]) -> bytes:
    """The packable words of a sorted table, hashed to their index: ``_packed.Table`` slots sized as
    ``_table_init(n * 3 // 4)`` sizes them, linear probing; the compiled engine maps them from the
    file instead of hashing the words at every start."""
    slots, bits = 1024, 10
    while slots < 2 * (len(words) * 3 // 4):
        slots, bits = slots * 2, bits + 1
    shift, mask = 64 - bits, slots - 1
    keys, values = [0] * slots, [0.0] * slots
    for i, word in enumerate(words):
        key = _pack(word)
        if key:
            at = ((key * _FIB) & 0xFFFFFFFFFFFFFFFF) >> shift
            while keys[at] and keys[at] != key:
                at = (at + 1) & mask
            if not keys[at]:  # the first of equal words, as bisect_left finds it
                keys[at], values[at] = key, float(i)
    table = array.array("Q", bytes(_SLOT * slots))
    table[0::2] = array.array("Q", keys)
    table[1::2] = array.array("Q", array.array("d", values).tobytes())
    return table.tobytes()


class MappedTable(Mapping[str, float]):
    """A read-only ``{word: value}`` over the bytes of its cache file (mapped, not parsed): sorted
    words (UTF-8, newline-separated) with their offsets, their values, and a hash table of the packable
    ones (:func:`_key_slots`). The compiled engine looks words up in those bytes (a probe, else a
    bisection of the UTF-8 words, which sort as the strings do), so a start makes no string of the
    270,000 words (nor splits, checks, hashes or frees them). Python
    lookups make the sorted words once, at the first (checked sorted: a file that is not ours fails
    with ``ValueError``)."""

    def __init__(self, buffer: Any, count: int, sections: Mapping[str, tuple[int, int]]) -> None:
        view = memoryview(buffer)

        def section(name: str) -> memoryview:
            at, size = sections[name]
            return view[at : at + size]

        self._count = count
        self.words_blob = section("words")
        self.offsets = section("offsets").cast(_OFFSET_TYPE)  # type: ignore[call-overload]
        self.value_array = section("values").cast("d")  # not ``values``: Mapping.values() stays a method
        self.key_slots = section("keys")
        if len(self.offsets) != count + 1 or len(self.value_array) != count or len(self.key_slots) % _SLOT:
            raise ValueError("sections of the wrong size")
        self._words: tuple[str, ...] | None = None

    def words(self) -> tuple[str, ...]:
        """The sorted words, made at the first call."""
        if self._words is None:
            words = tuple(bytes(self.words_blob).decode("utf-8").split("\n")[:-1]) if self._count else ()
            if len(words) != self._count or list(words) != sorted(words):
                raise ValueError("not a sorted table")
            self._words = words
        return self._words

    def __getitem__(self, word: str) -> float:
        words = self.words()
        i = bisect.bisect_left(words, word)
        if i < len(words) and words[i] == word:
            return self.value_array[i]
        raise KeyError(word)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return iter(self.words())


def _mapped_bytes(table: Mapping[str, float], extra: dict[str, object]) -> bytes:
    """The file of a :class:`MappedTable` (``table``\'s words sorted): a JSON header line naming its
    sections, then each of them at a multiple of 16 bytes."""
    words = sorted(table)
    encoded = [word.encode("utf-8") for word in words]
    offsets = array.array(_OFFSET_TYPE, [0])
    for word in encoded:
        offsets.append(offsets[-1] + len(word) + 1)
    parts = {"values": array.array("d", (table[w] for w in words)).tobytes(), "offsets": offsets.tobytes(),
             "keys": _key_slots(words), "words": b"".join(word + b"\n" for word in encoded)}
    header: dict[str, object] = {"format": FORMAT, "layout": IDF_LAYOUT, "count": len(words), **extra}
    sections: dict[str, list[int]] = {}
    at = 0
    for name, part in parts.items():
        sections[name] = [at, len(part)]
        at += -len(part) % 16 + len(part)
    header["sections"] = sections
    head = json.dumps(header).encode()
    head += b" " * (-(len(head) + 1) % 16) + b"\n"
    return head + b"".join(part + bytes(-len(part) % 16) for part in parts.values())


def _read_mapped(path: Path) -> tuple[MappedTable, dict[str, object]] | None:
    """The table of a file written by :func:`_mapped_bytes` and its header, None when absent or
    not ours. The file is mapped (read-only; a cache file is only ever replaced whole, never
    written in place), or read where it cannot be."""
    buffer = _map(path)
    if buffer is None:
        return None
    try:
        head_end = buffer.find(b"\n", 0, 1 << 16)
        header = json.loads(buffer[:head_end]) if head_end > 0 else None
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("layout") != IDF_LAYOUT:
            return None
        base, size = head_end + 1, len(buffer)
        sections = {name: (base + int(header["sections"][name][0]), int(header["sections"][name][1]))
                    for name in ("values", "offsets", "keys", "words")}
        if any(at < base or length < 0 or at + length > size for at, length in sections.values()):
            return None
        return MappedTable(buffer, int(header["count"]), sections), header
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def load_idf(source: Path) -> tuple[Mapping[str, float], float]:
    """jieba's IDF table (``word idf`` per line, parsed as ``jieba.analyse`` does) and its median,
    kept in the header (not sorted out of 270,000 values at every start). From the cache it is a
    :class:`MappedTable`, else a dict."""

    def median(values: Iterable[float]) -> float:
        ordered = sorted(values)
        return ordered[len(ordered) // 2]

    try:
        path: Path | None = _cache_file("idf", source, IDF_LAYOUT)
    except OSError:
        path = None
    loaded = _read_mapped(path) if path is not None else None
    if loaded is not None and isinstance(loaded[1].get("median"), float):
        _used(path)  # type: ignore[arg-type]
        return loaded[0], loaded[1]["median"]  # type: ignore[return-value]
    idf: dict[str, float] = {}
    for line in source.read_bytes().decode("utf-8").splitlines():
        word, value = line.strip().split(" ")
        idf[word] = float(value)
    middle = median(idf.values())
    storable = path is not None and not any("\n" in word for word in idf)
    if storable and _store(path, _mapped_bytes(idf, {"median": middle})):  # type: ignore[arg-type]
        _remove_stale("idf", path)  # type: ignore[arg-type]
    return dict(sorted(idf.items())), middle
