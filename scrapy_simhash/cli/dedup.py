"""``scrapy-simhash dedup`` and ``import``: a JSON-lines file through the engine, in order.

Lines are read (plain, gzip or stdin), parsed and fingerprinted (on ``--jobs`` worker processes
when asked), then decided in input order, :data:`DECIDE_BATCH` lines per index transaction (with
``--jobs``, more when the workers are ahead: :data:`DECIDE_BATCH_READY`); the kept lines and the
decisions of a batch are written only once it is committed. Bad lines are reported with their
number, counted and skipped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import multiprocessing.pool
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..index.owners import new_owner
from .common import (
    CliError,
    closing_output,
    describe,
    fingerprinter_options,
    json_type,
    make_fingerprinter,
    open_dedup,
    open_output,
    pick,
    silence_stdout,
    sync_output,
)
from .input import Input, Reader

if TYPE_CHECKING:
    from multiprocessing.pool import IMapIterator

    from ..dedup import Deduplicator, Verdict
    from ..fingerprint import Fingerprinter, Fingerprints

#: Lines of bad input reported on stderr before the rest are only counted (all are in --decisions).
MAX_REPORTED_BAD_LINES = 20
#: Lines decided in one index transaction (one fsync); their output is written after it commits.
DECIDE_BATCH = 32
#: With ``--jobs``: the lines the workers finished meanwhile join the transaction, up to this many.
#: The parent's commits are the run's serial part; while one waits for its fsync (milliseconds, far
#: more on a busy disk) the workers get ahead, and the next transaction takes what they made. Where
#: the parent sets the pace (English: a fingerprint costs less than its check-and-add) every
#: transaction is this long, so its fsync wait, which the parent spends idle, comes once a this
#: many lines (2,000 lines: 4 fsyncs instead of 16 at 128).
DECIDE_BATCH_READY = 512
#: With ``--jobs``: the workers run this much nicer than the parent. The parent's check-and-adds are
#: the run's serial part (in English, where fingerprints are cheap, its pace is the run's); with as
#: many workers as cores, three processes at one priority share two cores and the parent gets two
#: thirds of one. Two workers at +3 (weight 526 each) weigh what the parent (1024) does: the
#: scheduler leaves it a core, and the workers share the rest and what it leaves idle.
WORKER_NICE = 3
#: The tiers a match can come from, counted in the summary.
TIERS = ("title", "body", "sentence")
#: With ``--jobs``: seconds between looks at a Ctrl-C while no worker's answer comes.
INTERRUPT_POLL = 0.1
#: With ``--jobs``: seconds a run stopped early waits for its workers' answers before it kills them.
FINISH_TIMEOUT = 10.0


class LineResult(NamedTuple):
    """What a worker made of one input line (picklable: it crosses process boundaries)."""

    line: int
    url: str | None
    fps: Fingerprints | None  # None when the line is bad or blank
    error: str | None  # why the line is bad
    blank: bool
    kept: str | None  # the item re-serialized, when kept items are written


@dataclass
class LineWorker:
    """Turns one raw line into a :class:`LineResult`: decode, parse, pick fields, fingerprint."""

    fingerprinter: Fingerprinter
    title_fields: Sequence[str]
    body_fields: Sequence[str]
    url_fields: Sequence[str]
    keep_json: bool

    def __call__(self, numbered: tuple[int, bytes | str]) -> LineResult:
        n, raw = numbered
        if isinstance(raw, str):  # the reader's reason for not reading it (too long)
            return LineResult(n, None, None, raw, False, None)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return LineResult(n, None, None, f"not UTF-8 ({exc.reason} at byte {exc.start})", False, None)
        if not text.strip():
            return LineResult(n, None, None, None, True, None)
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            return LineResult(n, None, None, f"not JSON ({exc.msg} at column {exc.colno})", False, None)
        except RecursionError:
            return LineResult(n, None, None, "not JSON (nested too deeply)", False, None)
        if not isinstance(item, dict):
            return LineResult(n, None, None, f"not a JSON object but {json_type(item)}", False, None)
        url_name, url = pick(item, self.url_fields)
        if url is not None and not isinstance(url, str):
            return LineResult(n, None, None, f"field {url_name!r} must be a string, not {json_type(url)}",
                              False, None)
        title_name, title = pick(item, self.title_fields)
        body_name, body = pick(item, self.body_fields)
        if title_name is None and body_name is None:
            wanted = ", ".join(dict.fromkeys([*self.title_fields, *self.body_fields]))
            return LineResult(n, url, None, f"no title or body field (looked for {wanted})", False, None)
        for name, value in ((title_name, title), (body_name, body)):
            if value is None or isinstance(value, str):
                continue
            if name == body_name and isinstance(value, list) and all(isinstance(v, str) for v in value):
                continue  # a list of paragraphs
            expected = "a string or a list of strings" if name == body_name else "a string"
            return LineResult(n, url, None, f"field {name!r} must be {expected}, not {json_type(value)}",
                              False, None)
        try:
            fps = self.fingerprinter.fingerprint(title, body)
        except (TypeError, ValueError, UnicodeError, RecursionError) as exc:
            return LineResult(n, url, None, f"cannot fingerprint ({type(exc).__name__}: {exc})", False, None)
        kept = _json_line(item) if self.keep_json else None
        return LineResult(n, url, fps, None, False, kept)


def _json_line(obj: Any) -> str:
    """One JSON line, readable UTF-8 where possible; ASCII escapes when the data holds lone
    surrogates (from ``\\ud800``-style escapes in the input), which UTF-8 cannot carry."""
    text = json.dumps(obj, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj)
    return text


_worker: LineWorker | None = None


def _init_worker(fp_options: dict[str, Any], fields: tuple[list[str], list[str], list[str]], keep: bool) -> None:
    """Pool initializer (a spawned worker): one Fingerprinter per worker process, built with the
    parent's options."""
    global _worker
    _nicer()
    _worker = LineWorker(make_fingerprinter(fp_options), *fields, keep_json=keep)


def _nicer() -> None:
    """A worker's priority: :data:`WORKER_NICE` below the parent's (where the platform has nice)."""
    if hasattr(os, "nice"):
        os.nice(WORKER_NICE)


def _start_pool(jobs: int, worker: LineWorker, fp_options: dict[str, Any],
                fields: tuple[list[str], list[str], list[str]], keep: bool) -> multiprocessing.pool.Pool:
    """The worker processes. Forked where that is safe (Linux, and no other thread in this process
    yet: a fork copies only the calling thread, and a lock another thread held stays locked in the
    child): they start with the parent's engine, tables and route already loaded, instead of paying
    the engine's start-up again each (~0.1 s of CPU a worker). Elsewhere spawned, each building its own."""
    global _worker
    if sys.platform == "linux" and threading.active_count() == 1:
        worker.fingerprinter.prepare()  # what the first fingerprint loads, loaded once for all of them
        _worker = worker
        return _Pool(jobs, initializer=_forked_worker, context=multiprocessing.get_context("fork"))
    return _Pool(jobs, initializer=_init_worker, initargs=(fp_options, fields, keep),
                 context=multiprocessing.get_context("spawn"))


class _Pool(multiprocessing.pool.Pool):
    """A process pool whose worker handler thread sleeps until a worker exits or the pool changes
    state. CPython's also wakes whenever the results pipe is readable (``_get_sentinels``): while
    answers wait there for the result thread (which waits for the GIL behind the decide loop), it
    spins, building a selector and checking the workers over and over, on the parent's CPU and GIL,
    which the run's serial part needs. The workers' sentinels and the change notifier (close,
    terminate, the last task done) are all it acts on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started = {worker.pid for worker in self._pool}  # type: ignore[attr-defined]

    def _get_sentinels(self) -> list[Any]:
        return [self._change_notifier._reader]  # type: ignore[attr-defined]

    def lost_a_worker(self) -> bool:
        """Has a worker died (killed, out of memory)? The pool replaces it without a word, and the
        lines it was fingerprinting are never answered: the run would wait for them forever."""
        return any(worker.pid not in self._started or worker.exitcode is not None
                   for worker in list(self._pool))  # type: ignore[attr-defined]

    def finish(self) -> None:
        """Close the pool, let the workers answer what they were sent (a run stopped early: at most
        the reader's window of lines), and join it. Not ``terminate()``: it kills the workers, and one
        killed while it sends an answer leaves the answers' queue locked, on which the pool's own
        clean-up then waits forever (seen under load). A pool that lost a worker (whose lines are never
        answered) or is still busy after :data:`FINISH_TIMEOUT` is abandoned (:meth:`_abandon`)."""
        lost = self.lost_a_worker()  # before close(): closed, workers end of their own once all is answered
        self.close()
        if not lost:
            self._worker_handler.join(FINISH_TIMEOUT)  # type: ignore[attr-defined]  # it ends once all is answered
            if not self._worker_handler.is_alive():  # type: ignore[attr-defined]
                self.join()
                return
        self._abandon()

    def _abandon(self) -> None:
        """Kill the workers and leave the pool's threads behind (daemons: they end with the process).
        A dead worker may hold a lock of the pool's queues (an idle one waits for its next task holding
        the tasks' read lock), on which ``terminate()``'s clean-up, and the one the pool runs at exit,
        would wait forever: that clean-up is cancelled."""
        handler = self._worker_handler  # type: ignore[attr-defined]
        handler._state = multiprocessing.pool.TERMINATE  # no replacement workers from now on
        self._change_notifier.put(None)  # type: ignore[attr-defined]
        handler.join()
        for worker in list(self._pool):  # type: ignore[attr-defined]
            worker.kill()
            worker.join()
        self._terminate.cancel()  # type: ignore[attr-defined]


def _forked_worker() -> None:
    """Pool initializer (a forked worker): not the parent's signal handlers (a Python handler that
    only sets a flag, as Twisted's or an embedding program's may, would keep a SIGTERM from ending the
    worker: ``Pool.terminate``'s, the one :mod:`multiprocessing` sends its daemon processes at exit);
    Ctrl-C is the parent's."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _nicer()


def _work(chunk: list[tuple[int, bytes | str]]) -> list[LineResult]:
    assert _worker is not None
    return [_worker(numbered) for numbered in chunk]


@dataclass
class RunStats:
    """Counters of a dedup/import run."""

    lines: int = 0
    new: int = 0
    flagged: Counter[str] = field(default_factory=Counter)
    duplicate: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    released: int = 0  # pending entries of an earlier run that died before writing their lines out
    started: float = field(default_factory=time.monotonic)

    @property
    def kept(self) -> int:
        return self.new + sum(self.flagged.values())


class _Progress:
    """A one-line progress bar on stderr (items/s, and % and ETA when the input size is known)."""

    def __init__(self, source: Input, enabled: bool) -> None:
        self.source = source
        self.enabled = enabled
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, items: int, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self._last < 0.2:
            return
        self._last = now
        elapsed = max(now - self.started, 1e-9)
        rate = items / elapsed
        text = f"{items:,} items  {rate:,.0f} items/s  {_clock(elapsed)}"
        size = self.source.size
        if size:
            fraction = min(self.source.position / size, 1.0)
            width = 30
            done = int(fraction * width)
            eta = elapsed * (1 - fraction) / fraction if fraction > 0 else None
            bar = "#" * done + "." * (width - done)
            text = f"[{bar}] {fraction:4.0%}  {text}" + (f"  ETA {_clock(eta)}" if eta is not None else "")
        sys.stderr.write("\r" + text + "\x1b[K")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def decision_record(result: LineResult, verdict: Verdict | None) -> dict[str, Any]:
    """The decision line for one input line (see ``dedup --help``)."""
    record: dict[str, Any] = {"line": result.line, "url": result.url, "status": None, "tier": None,
                              "distance": None, "original": None, "error": None}
    if result.blank:
        record.update(status="skipped", error="blank line")
    elif result.error is not None or verdict is None:
        record.update(status="error", error=result.error)
    elif verdict.status == "error":
        record.update(status="error", error=f"index: {verdict.reason}")
    elif verdict.status == "skipped":
        reason = verdict.reason or "no_text"
        message = "too little text to fingerprint" if reason == "no_text" else reason
        record.update(status="skipped", error=message)
    else:
        record["status"] = verdict.status
        if verdict.status in ("duplicate", "flagged"):
            original = verdict.original
            record.update(tier=verdict.tier, distance=verdict.distance,
                          original=(original.url or f"entry #{original.id}") if original is not None else None)
    return record


def run_dedup(args: argparse.Namespace, *, outputs: bool = True) -> int:
    """``dedup`` and ``import``: read, fingerprint (maybe on ``--jobs`` processes), decide in order."""
    fp_options = fingerprinter_options(args)
    fields = (args.title_field, args.body_field, args.url_field)
    output_name = getattr(args, "output", None) if outputs else None
    decisions_name = getattr(args, "decisions", None) if outputs else None
    if output_name == "-" and decisions_name == "-":
        raise CliError("-o and --decisions cannot both be '-' (stdout)")
    stats = RunStats()
    with ExitStack() as stack:
        source = Input(args.input)
        stack.callback(source.close)
        try:
            fingerprinter = make_fingerprinter(fp_options)
        except (OSError, ValueError) as exc:
            raise CliError(describe(exc)) from exc
        keep = output_name is not None
        pool = None
        chunksize = 16
        # with --jobs, lines read ahead of those decided: a full transaction, and 8 chunks a worker in the works
        reader = Reader(source, window=DECIDE_BATCH_READY + chunksize * args.jobs * 8 if args.jobs > 1 else None,
                        max_bytes=args.max_line_bytes)
        if args.jobs > 1:
            # The pool starts before the index is opened: workers never inherit its connection. They
            # read and fingerprint the first lines while this process opens the index.
            ctrl_c = stack.enter_context(_ctrl_c_deferred())  # restored last, once the pool is joined
            pool = _start_pool(args.jobs, LineWorker(fingerprinter, *fields, keep_json=keep), fp_options, fields, keep)
            stack.callback(pool.finish)
            stop = threading.Event()
            stack.callback(_stop_feeding, stop, reader)  # first: the pool finishes once its feeder ends
            batches = _ready_batches(pool.imap(_work, _chunks(reader, chunksize, stop)), ctrl_c, pool.lost_a_worker)
        else:
            results = map(LineWorker(fingerprinter, *fields, keep_json=keep), reader)
            batches = iter(lambda: list(itertools.islice(results, DECIDE_BATCH)), [])
        # With outputs, an entry stays pending until its lines are written out and synced: a run killed
        # in between leaves entries that the next run releases (recover), so it writes those items again.
        owner = new_owner() if output_name or decisions_name else None
        dedup = open_dedup(args, fingerprinter, reset=args.reset, owner=owner)
        stack.callback(dedup.close)
        try:
            stats.released = dedup.index.recover()
        except Exception as exc:
            raise CliError(f"cannot open index {args.index}: {describe(exc)}") from exc
        out = stack.enter_context(closing_output(open_output(output_name))) if output_name else None
        dec = stack.enter_context(closing_output(open_output(decisions_name))) if decisions_name else None
        show = args.progress if args.progress is not None else sys.stderr.isatty()
        progress = _Progress(source, bool(show))
        run_error: str | None = None
        interrupted = False
        try:
            for batch in batches:
                for _ in batch:
                    reader.consumed()
                usable = [r for r in batch if r.fps is not None]
                try:  # one transaction (one fsync) for the batch; nothing is written out before it
                    decided = iter(dedup.decide_many([(r.fps, r.url) for r in usable]) if usable else ())
                except Exception as exc:
                    run_error = (f"index write failed at line {usable[0].line} "
                                   f"(lines {usable[0].line}-{usable[-1].line} not decided): {describe(exc)}")
                    break
                added = []
                for result in batch:
                    verdict = next(decided) if result.fps is not None else None
                    if verdict is not None and verdict.entry_id is not None:
                        added.append(verdict.entry_id)
                    record = decision_record(result, verdict)
                    _count(stats, record)
                    if record["status"] == "error" and not args.quiet:
                        _report_bad_line(stats.errors, record)
                    if out is not None and record["status"] in ("new", "flagged") and result.kept is not None:
                        out.write(result.kept + "\n")
                    if dec is not None:
                        dec.write(_json_line(record) + "\n")
                if owner is not None and added:  # the lines are on disk before their entries count
                    for stream in (out, dec):
                        if stream is not None:
                            sync_output(stream)
                    dedup.index.deliver(added)
                progress.update(stats.lines)
        except KeyboardInterrupt:
            interrupted = True
        except WorkerDied as exc:
            run_error = f"{exc}: lines after line {stats.lines:,} were not decided"
        except BrokenPipeError:
            silence_stdout()
            raise CliError("output closed (broken pipe)", 1) from None
        finally:
            progress.close()
        entries = _safe(dedup.index.count)
        _print_summary(args, stats, dedup, entries, source, reader)
    if interrupted:
        print("interrupted: the summary covers the lines decided so far", file=sys.stderr)
        return 130
    if run_error or reader.error:
        print(f"error: {run_error or reader.error}", file=sys.stderr)
        return 1
    return 0


def _chunks(reader: Reader, size: int, stop: threading.Event) -> Iterator[list[tuple[int, bytes | str]]]:
    """The reader's lines in lists of ``size``: one task of the pool each; none once ``stop`` is set."""
    chunk: list[tuple[int, bytes | str]] = []
    for numbered in reader:
        if stop.is_set():
            return
        chunk.append(numbered)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk and not stop.is_set():
        yield chunk


def _stop_feeding(stop: threading.Event, reader: Reader) -> None:
    """End the pool's feed of lines (a run that stops early: Ctrl-C, an index error). Its feeder
    thread may wait for the reader's window, which only decided lines open: without this, it waits
    forever, and the pool, which finishes once every line sent is answered (:meth:`_Pool.finish`), with it."""
    stop.set()
    reader.consumed()  # one more line read: the feeder sees the stop


@contextmanager
def _ctrl_c_deferred() -> Iterator[list[int]]:
    """Ctrl-C noted in the list it yields instead of raised wherever the main thread happens to be,
    while the pool runs. Raised there, a ``KeyboardInterrupt`` can land between a lock's acquisition
    and the ``with`` that would release it (a lock the pool's threads share with this one: its
    results' or the reader's window), and the pool's clean-up then waits forever for threads blocked
    on it (seen under load). :func:`_ready_batches` raises it where no lock is held.
    A handler other than Python's default (an embedding program's) is left alone."""
    seen: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield seen
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


class WorkerDied(Exception):
    """A ``--jobs`` worker process died: the lines it held will never be answered."""


def _ready_batches(chunks: IMapIterator, ctrl_c: Sequence[int],
                   lost_a_worker: Callable[[], bool]) -> Iterator[list[LineResult]]:
    """The lines of each transaction, from the pool's answers in input order: :data:`DECIDE_BATCH`,
    and the chunks already answered after them, up to :data:`DECIDE_BATCH_READY`. A Ctrl-C noted in
    ``ctrl_c`` (:func:`_ctrl_c_deferred`) is raised here, between transactions, as ``KeyboardInterrupt``;
    a worker lost while the answers wait, as :class:`WorkerDied`."""
    batch: list[LineResult] = []
    while True:
        if ctrl_c:
            raise KeyboardInterrupt
        try:
            chunk = chunks.next(timeout=INTERRUPT_POLL)
        except multiprocessing.TimeoutError:
            if lost_a_worker():
                raise WorkerDied("a --jobs worker process died (killed, or out of memory?)") from None
            continue
        except StopIteration:
            break
        batch += chunk
        if len(batch) < DECIDE_BATCH:
            continue
        while len(batch) < DECIDE_BATCH_READY:
            try:
                batch += chunks.next(timeout=0)
            except (multiprocessing.TimeoutError, StopIteration):
                break
        yield batch
        batch = []
    if batch:
        yield batch


def _count(stats: RunStats, record: Mapping[str, Any]) -> None:
    stats.lines += 1
    status = record["status"]
    if status == "new":
        stats.new += 1
    elif status == "duplicate":
        stats.duplicate[record["tier"]] += 1
    elif status == "flagged":
        stats.flagged[record["tier"]] += 1
    elif status == "skipped":
        stats.skipped[record["error"]] += 1
    else:
        stats.errors += 1


def _report_bad_line(errors: int, record: Mapping[str, Any]) -> None:
    if errors <= MAX_REPORTED_BAD_LINES:
        print(f"line {record['line']}: {record['error']}; skipped", file=sys.stderr)
    if errors == MAX_REPORTED_BAD_LINES:
        print("(further bad lines are counted, not shown: see --decisions)", file=sys.stderr)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _safe(func: Callable[[], Any]) -> Any:
    try:
        return func()
    except Exception:
        return None


def _print_summary(args: argparse.Namespace, stats: RunStats, dedup: Deduplicator, entries: int | None,
                   source: Input, reader: Reader) -> None:
    elapsed = time.monotonic() - stats.started
    rate = stats.lines / elapsed if elapsed > 0 else 0.0
    dup = sum(stats.duplicate.values())
    flagged = sum(stats.flagged.values())
    skipped = sum(stats.skipped.values())

    def tiers(counter: Counter[str]) -> str:
        return ", ".join(f"{tier} {counter.get(tier, 0):,}" for tier in TIERS)

    lines = [
        f"{args.command}: {stats.lines:,} {'line' if reader.format == 'JSON lines' else 'item'}{_s(stats.lines)} "
        f"in {elapsed:.1f} s ({rate:,.0f} items/s, {args.jobs} job{_s(args.jobs)})",
        f"  input      {'stdin' if source.name == '-' else source.name}: {reader.format}"
        + (", gzip" if source.compressed else ""),
        f"  kept       {stats.kept:>9,}  (new {stats.new:,}, flagged {flagged:,}: {tiers(stats.flagged)})",
        f"  duplicate  {dup:>9,}  ({tiers(stats.duplicate)})",
        f"  skipped    {skipped:>9,}" + (
            "  (" + ", ".join(f"{reason}: {n:,}" for reason, n in stats.skipped.most_common()) + ")"
            if skipped else ""),
        f"  errors     {stats.errors:>9,}" + ("  (bad lines, see above or --decisions)" if stats.errors else ""),
        f"  index      {dedup.index.location} (namespace {dedup.index.namespace!r}): "
        + (f"{entries:,} entries" if entries is not None else "entry count unavailable"),
    ]
    if stats.released:
        lines.append(f"  released   {stats.released:>9,}  (entries of an earlier run that died before writing "
                     "its items out: decided again)")
    print("\n".join(lines), file=sys.stderr)
