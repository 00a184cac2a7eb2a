"""``scrapy-simhash dedup`` and ``import``: a JSON-lines file through the engine, in order.

Lines are read (plain, gzip or stdin), parsed and fingerprinted (on ``--jobs`` worker processes
when asked), then decided in input order, :data:`DECIDE_BATCH` lines per index transaction (with
``--jobs``, more when the workers are ahead: :data:`DECIDE_BATCH_READY`); the kept lines and the
decisions of a batch are written only once it is committed. Bad lines are reported with their
number, counted and skipped.

What is written stays proportional to the items, however the input is made (a small gzip file can
hold millions of empty lines): every item gets a decision line; a line that is no item (blank, or
with neither a title nor a body) is counted in the summary by its reason, without a decision line;
bad lines get an error decision line up to :data:`MAX_ERROR_DECISIONS`, and are counted after that.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..index.damage import entry_damage
from ..index.owners import new_owner
from ..workers.pool import FINISH_TIMEOUT, WORKER_NICE, InOrder, WorkerDied, WorkerPool, ctrl_c_deferred
from .common import (
    MAX_ERROR_DECISIONS,
    CliError,
    closing_output,
    describe,
    fingerprinter_options,
    make_fingerprinter,
    open_dedup,
    open_output,
    silence_stdout,
    sync_output,
)
from .input import Input, Reader
from .lines import BLANK, LineResult, LineWorker, json_line

if TYPE_CHECKING:
    from ..engine import Deduplicator, Verdict
    from ..index import Entry

#: Lines of bad input reported on stderr before the rest are only counted.
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
#: With ``--jobs``: lines in one task of the pool, and tasks out per worker (the lines read ahead of
#: those decided are a full transaction and these). See docs/decisions/0405-jobs-tasks.md.
JOBS_CHUNK, JOBS_AHEAD = 16, 8
#: The tiers a match can come from, counted in the summary.
TIERS = ("title", "body", "sentence")

_line_worker: LineWorker | None = None


def _start_line_worker(fp_options: dict[str, Any], fields: tuple[list[str], list[str], list[str]], keep: bool,
                       forked: LineWorker | None) -> None:
    """A ``--jobs`` worker's start: the parent's :class:`LineWorker` when forked, else one built
    with the parent's options."""
    global _line_worker
    _line_worker = forked or LineWorker(make_fingerprinter(fp_options), *fields, keep_json=keep)


def _lines_of(chunk: list[tuple[int, bytes | str]]) -> list[LineResult]:
    """One task of a ``--jobs`` worker: a chunk of numbered lines made into their results."""
    assert _line_worker is not None
    return [_line_worker(numbered) for numbered in chunk]


def _chunks(reader: Iterable[tuple[int, bytes | str]], size: int) -> Iterator[list[tuple[int, bytes | str]]]:
    """The reader's lines in lists of ``size``."""
    lines = iter(reader)
    while chunk := list(itertools.islice(lines, size)):
        yield chunk


def _start_jobs(jobs: int, worker: LineWorker, fp_options: dict[str, Any],
                fields: tuple[list[str], list[str], list[str]], keep: bool) -> WorkerPool:
    """The ``--jobs`` workers, :data:`WORKER_NICE` nicer than this process, whose check-and-adds
    are the run's serial part. Forked where that is safe (Linux, and no other thread yet): they
    start with this process's engine, tables and route already loaded, instead of each building its
    own. Elsewhere spawned."""
    if sys.platform == "linux" and threading.active_count() == 1:
        worker.fingerprinter.prepare()  # what the first fingerprint loads, loaded once for all of them
        return WorkerPool(jobs, _start_line_worker, (fp_options, fields, keep, worker), fork=True, nice=WORKER_NICE)
    return WorkerPool(jobs, _start_line_worker, (fp_options, fields, keep, None), nice=WORKER_NICE)


@dataclass
class RunStats:
    """Counters of a dedup/import run."""

    lines: int = 0
    new: int = 0
    flagged: Counter[str] = field(default_factory=Counter)
    duplicate: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    last_line: int = 0  # the number of the last line decided or counted
    damaged: int = 0  # decisions whose original entry holds values the index never writes
    first_damage: str | None = None
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
    if result.skipped is not None:
        record.update(status="skipped", error=result.skipped)
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
            named = None
            if original is not None:  # by URL; by id when it has none (or one the index never writes)
                named = original.url if original.url and isinstance(original.url, str) else f"entry #{original.id}"
            record.update(tier=verdict.tier, distance=verdict.distance, original=named)
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
        reader = Reader(source, max_bytes=args.max_line_bytes)
        if args.jobs > 1:
            # The pool starts before the index is opened: workers never inherit its connection. They
            # read and fingerprint the first lines while this process opens the index.
            ctrl_c = stack.enter_context(ctrl_c_deferred())  # restored last, once the pool is finished
            pool = _start_jobs(args.jobs, LineWorker(fingerprinter, *fields, keep_json=keep), fp_options, fields, keep)
            # a run stopped early waits a bounded time for what the workers took, then kills them
            stack.callback(pool.finish, FINISH_TIMEOUT, True)
            ahead = (DECIDE_BATCH_READY + JOBS_CHUNK * JOBS_AHEAD * args.jobs) // JOBS_CHUNK
            answers = InOrder(pool, _lines_of, _chunks(reader, JOBS_CHUNK), ahead, ctrl_c)
            batches = answers.batches(DECIDE_BATCH, DECIDE_BATCH_READY)
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
                usable = [r for r in batch if r.fps is not None]
                try:  # one transaction (one fsync) for the batch; nothing is written out before it
                    items = [(r.fps, r.url) for r in usable if r.fps is not None]
                    decided = iter(dedup.decide_many(items) if items else ())
                except Exception as exc:
                    run_error = (f"index write failed at line {usable[0].line} "
                                   f"(lines {usable[0].line}-{usable[-1].line} not decided): {describe(exc)}")
                    break
                added = []
                for result in batch:
                    _count_blank(stats, result.line - stats.last_line - 1)  # the lines the reader passed over
                    stats.last_line = result.line
                    verdict = next(decided) if result.fps is not None else None
                    if verdict is not None and verdict.entry_id is not None:
                        added.append(verdict.entry_id)
                    if verdict is not None and verdict.original is not None:
                        _check_original(stats, verdict.original)
                    record = decision_record(result, verdict)
                    _count(stats, record)
                    if record["status"] == "error" and not args.quiet:
                        _report_bad_line(stats.errors, record)
                    if out is not None and record["status"] in ("new", "flagged") and result.kept is not None:
                        out.write(result.kept + "\n")
                    if dec is not None and result.skipped is None and (
                            record["status"] != "error" or stats.errors <= MAX_ERROR_DECISIONS):
                        dec.write(json_line(record) + "\n")
                if owner is not None and added:  # the lines are on disk before their entries count
                    for stream in (out, dec):
                        if stream is not None:
                            sync_output(stream)
                    dedup.index.deliver(added)
                progress.update(stats.lines)
        except KeyboardInterrupt:
            interrupted = True
        except WorkerDied:
            run_error = (f"a --jobs worker process died (killed, or out of memory?): lines after line {stats.lines:,} "
                         "were not decided")
        except BrokenPipeError:
            silence_stdout()
            raise CliError("output closed (broken pipe)", 1) from None
        finally:
            progress.close()
        if not interrupted and not run_error:
            _count_blank(stats, reader.lines - stats.last_line)  # blank lines at the end
        entries = _safe(dedup.index.count)
        _print_summary(args, stats, dedup, entries, source, reader)
    if interrupted:
        print("interrupted: the summary covers the lines decided so far", file=sys.stderr)
        return 130
    if run_error or reader.error:
        print(f"error: {run_error or reader.error}", file=sys.stderr)
        return 1
    return 0


def _count_blank(stats: RunStats, n: int) -> None:
    if n > 0:
        stats.lines += n
        stats.skipped[BLANK] += n
        stats.last_line += n


def _check_original(stats: RunStats, original: Entry) -> None:
    """Count an original whose values are not what the index writes (it is named by id)."""
    problem = entry_damage(original)
    if problem is not None:
        stats.damaged += 1
        stats.first_damage = stats.first_damage or problem


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
        f"  errors     {stats.errors:>9,}" + (
            "  (bad lines, see above or --decisions" + (
                f": the first {MAX_ERROR_DECISIONS:,} of them" if stats.errors > MAX_ERROR_DECISIONS else "") + ")"
            if stats.errors else ""),
        f"  index      {dedup.index.location} (namespace {dedup.index.namespace!r}): "
        + (f"{entries:,} entries" if entries is not None else "entry count unavailable"),
    ]
    if stats.damaged:
        lines.append(f"  damaged    {stats.damaged:>9,}  (decisions whose original entry holds values scrapy-simhash "
                     f"never writes: named by id when its URL is one; the first: {stats.first_damage})")
    if stats.released:
        lines.append(f"  released   {stats.released:>9,}  (entries of an earlier run that died before writing "
                     "its items out: decided again)")
    print("\n".join(lines), file=sys.stderr)
