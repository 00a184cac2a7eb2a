"""A pending write-ahead log checked before SQLite reads it: damage that would drop committed entries is refused.

SQLite trusts its WAL file: when it reopens a file whose last writer died, it replays the frames from
the start of the WAL up to the last commit frame whose checksum chain holds, and silently ignores the
rest. That is right after a crash (the tail is an unfinished transaction), but after damage it drops
committed entries without a word, and the next write overwrites them for good: items seen before are
admitted again. So when a ``-wal`` or ``-shm`` file is there (beside the file a symbolic link leads to,
where SQLite looks) and no other connection is using the file,
:func:`check_wal` reads it (the format: https://www.sqlite.org/walformat.html) before SQLite does, and
refuses, leaving every file untouched, when

* the WAL is shorter than its 32-byte header, or its header is not a valid WAL header (magic
  0x377f0682/0x377f0683, format 3007000, a page size, its checksum): SQLite would ignore every frame;
* its page size is not the main file's: a WAL of another database;
* after the first frame that breaks the checksum chain (or has other salts), some later commit frame
  carries the header's salts and a checksum that chains from the frame before it: committed
  transactions lie beyond damage in the middle. (A crash only leaves an unfinished transaction after
  the last commit, whose commit frame, if written at all, is the one that is broken.)
* the ``-shm`` file left by the last writer is intact and, for this WAL (the same salts), records more
  committed frames than the WAL holds (truncated, e.g. to its header); or the WAL is empty or gone
  while that ``-shm`` records committed frames not yet copied into the main file (SQLite would open
  the file as it was before them);
* the database, as of the last valid commit, has pages that are in neither the main file nor the WAL
  (the main file was truncated), or the main file is not a whole number of pages.

What cannot be detected, and why: a WAL cut exactly after a commit frame, or emptied, when the
``-shm`` file is gone too (nothing else records how long it was: the main file is not updated by WAL
commits); a whole WAL of another index with the same page size (nothing in it names its database);
damage inside the main file's pages (SQLite keeps no checksums of them; ``PRAGMA integrity_check``
finds some of it but reads the whole file, too slow for every open); a WAL that was valid but older
(an earlier copy of the same file's WAL). A WAL torn by a power failure in its header (not by a
process crash: the header is one small write) is refused too, though it holds nothing committed:
the message says how to open the file without it.

The check runs only when this process can be sure nobody else is using the file: it holds the
``-shm`` file's "dead man switch" byte (the lock SQLite's first opener takes) with an open-file-
description lock while it reads, so other openers wait the few milliseconds it takes; when another
connection holds it, the file is live and its WAL is that connection's business. Where such locks
are not available (not Linux), the check is skipped. It reads the WAL once (a checksum over each
frame; a WAL is checkpointed at about 1,000 frames), and only after an unclean end.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from ..base import IndexOpenError
from .fd import descriptor

_MAGIC = (0x377F0682, 0x377F0683)
_VERSION = 3007000
_HEADER = 32
_FRAME_HEADER = 24
_SHM_HEADER = 48  # one copy of the wal-index header; the -shm file starts with two
_SHM_BACKFILL = 96  # after the two header copies: frames the last checkpoint copied into the main file
_DMS_BYTE = 128  # the -shm lock byte every open connection holds shared (unix VFS)
_MASK = 0xFFFFFFFF


def _checksum(buf: bytes | mmap.mmap, start: int, length: int, s0: int, s1: int, big: bool) -> tuple[int, int]:
    words = struct.unpack_from(f"{'>' if big else '<'}{length // 4}I", buf, start)
    it = iter(words)
    for x0 in it:
        s0 = (s0 + x0 + s1) & _MASK
        s1 = (s1 + next(it) + s0) & _MASK
    return s0, s1


@contextlib.contextmanager
def _alone(shm: Path) -> Iterator[bool]:
    """True while nobody else can open the database (we hold the ``-shm`` dead-man-switch byte
    exclusively, or there is no ``-shm``); False when another connection is live or locks are not
    available."""
    setlk = getattr(fcntl, "F_OFD_SETLK", None)
    if setlk is None:
        yield False
        return
    lock, unlock = (struct.pack("@hhqqi4x", kind, os.SEEK_SET, _DMS_BYTE, 1, 0)
                    for kind in (fcntl.F_WRLCK, fcntl.F_UNLCK))
    with contextlib.ExitStack() as stack:
        try:
            fd = stack.enter_context(descriptor(shm, os.O_RDWR))
        except FileNotFoundError:
            yield True
            return
        except OSError:  # a -shm this user cannot write: ask whether anyone holds the byte
            try:
                fd = stack.enter_context(descriptor(shm))
                free = struct.unpack("@h", fcntl.fcntl(fd, fcntl.F_OFD_GETLK, lock)[:2])[0] == fcntl.F_UNLCK
            except OSError:
                free = False
            yield free
            return
        try:
            fcntl.fcntl(fd, setlk, lock)
        except OSError:
            yield False  # held by a live connection (possibly of this process)
            return
        try:
            yield True
        finally:  # the descriptor may be kept open (see fd.py): release the lock explicitly
            fcntl.fcntl(fd, setlk, unlock)


def _shm_record(shm: Path) -> tuple[bytes, int, int] | None:
    """(salts, committed frames, frames copied into the main file) from an intact wal-index header
    left in ``-shm`` (two equal copies, initialised, its checksum right), else None."""
    try:
        with descriptor(shm) as fd:
            head = os.pread(fd, _SHM_BACKFILL + 4, 0)
    except OSError:
        return None
    if len(head) < _SHM_BACKFILL + 4 or head[:_SHM_HEADER] != head[_SHM_HEADER:2 * _SHM_HEADER]:
        return None
    version, _, _, is_init = struct.unpack_from("=IIIB", head, 0)
    if (version != _VERSION or is_init != 1
            or _checksum(head, 0, 40, 0, 0, sys.byteorder == "big") != struct.unpack_from("=II", head, 40)):
        return None
    (max_frame,) = struct.unpack_from("=I", head, 16)
    (backfilled,) = struct.unpack_from("=I", head, _SHM_BACKFILL)
    return head[32:40], max_frame, backfilled


def wal_problem(wal: bytes | mmap.mmap, main_size: int, page_size: int, header_pages: int,
                shm: tuple[bytes, int, int] | None) -> str | None:
    """What is wrong with this pending WAL for a main file of ``main_size`` bytes whose header says
    ``page_size`` and ``header_pages``; None when SQLite would lose nothing committed."""
    size = len(wal)
    if size < _HEADER:
        return f"its WAL ({size} bytes) is shorter than a WAL header"
    magic, version, wal_page_size, _, salt1, salt2, c1, c2 = struct.unpack_from(">8I", wal, 0)
    big = magic & 1 == 1
    if (magic not in _MAGIC or version != _VERSION or wal_page_size & (wal_page_size - 1)
            or not 512 <= wal_page_size <= 65536 or _checksum(wal, 0, 24, 0, 0, big) != (c1, c2)):
        return "its WAL does not start with a valid WAL header (damaged or not a WAL)"
    if wal_page_size != page_size:
        return f"its WAL has pages of {wal_page_size} bytes, the file {page_size}: the WAL of another database"
    frame = _FRAME_HEADER + page_size
    frames = (size - _HEADER) // frame

    def frame_at(i: int) -> tuple[int, int, int, int, int, int]:  # frames are numbered from 1
        return struct.unpack_from(">6I", wal, _HEADER + (i - 1) * frame)

    def chains(i: int, s0: int, s1: int) -> bool:
        _, _, f_salt1, f_salt2, f0, f1 = frame_at(i)
        if (f_salt1, f_salt2) != (salt1, salt2):
            return False
        at = _HEADER + (i - 1) * frame
        s0, s1 = _checksum(wal, at, 8, s0, s1, big)
        return _checksum(wal, at + _FRAME_HEADER, page_size, s0, s1, big) == (f0, f1)

    s0, s1 = c1, c2
    last_commit, db_pages, pages_in_wal, pending = 0, header_pages, set(), set()
    valid = 0
    while valid < frames and chains(valid + 1, s0, s1):
        valid += 1
        page, commit, _, _, s0, s1 = frame_at(valid)
        pending.add(page)
        if commit:
            last_commit, db_pages = valid, commit
            pages_in_wal |= pending
            pending = set()
    for i in range(valid + 2, frames + 1):
        _, commit, *_ = frame_at(i)
        previous = frame_at(i - 1)
        if commit and chains(i, previous[4], previous[5]):
            return (f"its WAL is damaged at frame {valid + 1}: commit frame {i} after it is intact, "
                    f"so SQLite would silently drop committed transactions")
    if shm is not None and shm[0] == wal[16:24] and shm[1] > last_commit:
        return (f"its WAL holds {last_commit} committed frames but its last writer recorded {shm[1]} "
                "(the WAL was truncated)")
    if main_size % page_size:
        return f"the file is {main_size} bytes, not a whole number of {page_size}-byte pages"
    missing = [p for p in range(main_size // page_size + 1, db_pages + 1) if p not in pages_in_wal]
    if missing:
        return (f"the file has {main_size // page_size} pages but the database has {db_pages}, and "
                f"{len(missing)} of the missing pages are not in its WAL (the file was truncated)")
    return None


def emptied_problem(wal_size: int | None, shm: tuple[bytes, int, int] | None) -> str | None:
    """What is wrong with an empty (``wal_size`` 0) or missing (None) WAL beside an intact ``-shm``
    record: committed frames the last checkpoint had not yet copied into the main file are gone."""
    if shm is None or shm[1] <= shm[2]:
        return None
    return (f"its WAL is {'missing' if wal_size is None else 'empty'} but its last writer recorded "
            f"{shm[1]} committed frames in it, {shm[1] - shm[2]} of them not yet copied into the file "
            "(the WAL was emptied or deleted)")


def check_wal(file: Path, page_size: int, header_pages: int, *, created: bool = False) -> None:
    """Refuse (:class:`~.base.IndexOpenError`, nothing touched) a pending WAL that SQLite would
    replay losing committed transactions, an emptied or deleted one whose ``-shm`` says it held
    some, or a main file that no longer matches it. The ``-wal`` and ``-shm`` read are those beside
    the file symbolic links lead to: the ones SQLite uses. ``created``: this process has just made
    the file, so a ``-shm`` without a WAL is a leftover of an earlier file of that name (deleted
    without it), which SQLite resets."""
    real = Path(os.path.realpath(file))
    wal, shm = Path(f"{real}-wal"), Path(f"{real}-shm")
    try:
        pending = wal.stat().st_size > 0
    except FileNotFoundError:
        pending = False
    if not pending and not shm.exists():
        return
    with _alone(shm) as alone:
        if not alone:
            return
        try:
            main_size = file.stat().st_size
            try:
                wal_size: int | None = wal.stat().st_size
            except FileNotFoundError:
                wal_size = None
            if not wal_size:
                problem = None if created else emptied_problem(wal_size, _shm_record(shm))
            else:
                problem = _pending_problem(wal, main_size, page_size, header_pages, shm)
        except FileNotFoundError as exc:
            if exc.filename != str(wal):
                raise IndexOpenError(f"cannot read index {file}: {exc}") from exc
            return  # the last connection closed meanwhile: checkpointed, nothing pending
        except OSError as exc:
            raise IndexOpenError(f"cannot read the WAL of index {file}: {exc}") from exc
    if problem:
        wal_name, shm_name = (wal.name, shm.name) if real == file else (str(wal), str(shm))
        raise IndexOpenError(
            f"index {file} is damaged: {problem}. Nothing was changed. Restore it from a backup; or, "
            f"accepting the loss of what {wal_name} holds, move {wal_name} and {shm_name} aside and open again"
        )


def _pending_problem(wal: Path, main_size: int, page_size: int, header_pages: int, shm: Path) -> str | None:
    """:func:`wal_problem` of the WAL file ``wal`` (its ``-shm`` record read only when it has a header)."""
    with open(wal, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < _HEADER:
            return wal_problem(fh.read(), main_size, page_size, header_pages, None)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return wal_problem(data, main_size, page_size, header_pages, _shm_record(shm))
