"""Nothing of a :class:`~scrapy_simhash.workers.fingerprints.FingerprintPool` outlives its ``shutdown()``: no
thread of its own (the interpreter's exit joins them: one left waiting would hold the crawl's exit up
for ever) and no worker process, even when a worker died while another was stuck."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash import Fingerprinter
from scrapy_simhash.workers import process as worker_process
from scrapy_simhash.workers.fingerprints import MAX_BATCH, MAX_RESTARTS, FingerprintPool
from tests.conftest import STORY_EN, STORY_ZH, STORY_ZH_2
from tests.procs import children, running

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc")


def new_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]


def die_or_stall(pairs: list[tuple[Any, Any]]) -> Any:
    """In a worker, the first call of the test dies (SIGKILL) once another worker is stuck in the
    second call (for ten minutes); later calls fingerprint as usual."""
    marks = Path(os.environ["SIMHASH_TEST_MARKS"])
    try:
        (marks / "die").touch(exist_ok=False)
    except FileExistsError:
        pass
    else:
        deadline = time.monotonic() + 60
        while not (marks / "stall").exists() or not (marks / "stall").read_text():
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        fd = os.open(marks / "stall", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return worker_process._fingerprint_many(pairs)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(600)
    return worker_process._fingerprint_many(pairs)


def test_a_worker_stuck_when_another_dies_is_killed_and_shutdown_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker dies while another is stuck in a call (workers ignore SIGTERM): the dead one's items
    go to a fresh worker at once, the stuck one is killed once its call is ``timeout`` seconds old and
    its items go to a fresh worker too; every item is answered and shutdown leaves no thread or
    process behind."""
    monkeypatch.setenv("SIMHASH_TEST_MARKS", str(tmp_path))  # the workers are spawned with it
    here = Fingerprinter()
    before_threads, before_children = set(threading.enumerate()), children()
    pool = FingerprintPool(2, {}, here.fingerprint, timeout=3)
    pool._call = die_or_stall
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN] * MAX_BATCH  # three calls out at once
    stuck = 0
    try:
        got = [f.result(timeout=120) for f in [pool.submit(s["title"], s["body"]) for s in stories]]
        stuck = int((tmp_path / "stall").read_text())
        done = threading.Thread(target=pool.shutdown)
        done.start()
        done.join(60)
        assert not done.is_alive(), "shutdown waits for the stuck worker"
        assert not running(stuck), "the stuck worker of the broken executor is still alive"
    finally:
        if stuck and running(stuck):
            os.kill(stuck, signal.SIGKILL)  # else this test's failure would hold the suite's exit up
    assert got == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert pool.died == 2 and pool.stalled == 1
    assert not new_threads(before_threads)
    assert children() <= before_children


def test_workers_that_cannot_start_leave_no_thread_after_shutdown(tmp_path: Path) -> None:
    """Each worker dies in its start and a fresh one replaces it, up to MAX_RESTARTS: shutdown waits
    for all of them to end, not only for the last one."""
    here = Fingerprinter()
    before = set(threading.enumerate())
    pool = FingerprintPool(1, {"user_dict": str(tmp_path / "gone.txt")}, here.fingerprint)
    try:
        got = [pool.submit(s["title"], s["body"]).result(timeout=120) for s in (STORY_ZH, STORY_EN)]
    finally:
        pool.shutdown()
    assert pool.died == MAX_RESTARTS + 1
    assert got == [here.fingerprint(s["title"], s["body"]) for s in (STORY_ZH, STORY_EN)]
    assert not new_threads(before)

