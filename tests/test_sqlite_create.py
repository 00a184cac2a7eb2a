"""Creating a SQLite index file: what it syncs, counted by ``strace`` (the calls, not their time)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import sys
from pathlib import Path
from scrapy_simhash.index.sqlite.file import create_file
create_file(Path(sys.argv[1]), {"note": "made by the test"})
"""


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("strace") is None, reason="needs strace (Linux)")
def test_a_new_index_file_is_synced_once_whole_before_it_is_linked_then_its_directory(tmp_path: Path) -> None:
    """Nobody sees the file under construction: its schema and its switch to WAL are written without
    a journal or syncs of their own; the finished file is synced, linked into place, and its
    directory synced (the index is as durable once there as before; 10 syncs became 2)."""
    target = tmp_path / "new.sqlite3"
    log = tmp_path / "strace.log"
    proc = subprocess.run(["strace", "-f", "-y", "-e", "trace=fsync,fdatasync,link,rename", "-o", str(log),
                           sys.executable, "-c", PROGRAM, str(target)], capture_output=True, text=True)
    if proc.returncode != 0 and "ptrace" in proc.stderr:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    calls = []
    for line in log.read_text().splitlines():
        m = re.search(r"\b(fsync|fdatasync|link|rename)\((\d+<([^>]*)>|\"([^\"]*)\")", line)
        if m:
            calls.append((m.group(1), Path(m.group(3) or m.group(4)).name))
    syncs = [c for c in calls if c[0] in ("fsync", "fdatasync")]
    assert [name for _, name in syncs if name.endswith(".creating")] == [syncs[0][1]], calls
    assert calls == [("fsync", syncs[0][1]), ("link", syncs[0][1]), ("fsync", tmp_path.name)], calls
    conn = sqlite3.connect(target)  # complete: the meta record, the schema, in WAL mode
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT value FROM simhash_meta WHERE key = 'note'").fetchone() == ('"made by the test"',)
        assert conn.execute("SELECT count(*) FROM entry").fetchone() == (0,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    assert not [p.name for p in tmp_path.iterdir() if ".creating" in p.name]
