"""The SQL of the SQLite index file's tables (what each holds and why: :mod:`.tables`)."""

from __future__ import annotations

from functools import cache

#: Odd, below 2**43: ``ns * FP_MIX`` never overflows a signed 64-bit integer (namespace ids < 2**20)
#: and spreads a namespace id over many bits (two namespaces' keys meet only far from near copies).
FP_MIX = 0x6A09E667F3B


def fp_key_sql(column: str) -> str:
    """The SQL of a fingerprint index's key: an integer fingerprint XOR ``ns * FP_MIX`` (``a | b``
    minus ``a & b``: SQLite has no XOR, and neither side overflows), so the index needs no ``ns``
    column (one record-header byte an entry each) and namespaces holding one fingerprint (an empty
    body) still get apart keys; a 128-bit BLOB fingerprint is its own key. Computed in Python by
    :meth:`.tables.Rows.fp_key`; a lookup compares ``ns`` and the fingerprint on the row as well."""
    mask = f"(ns * {FP_MIX:#x})"
    return f"CASE typeof({column}) WHEN 'integer' THEN ({column} | {mask}) - ({column} & {mask}) ELSE {column} END"


@cache
def insert_rows_sql(table: str, columns: str, n: int) -> str:
    """``INSERT OR IGNORE`` of ``n`` rows of ``columns`` (a comma list) in one statement: a
    statement's overhead once, not once a row as ``executemany`` pays it."""
    one = "(" + ", ".join("?" * len(columns.split(","))) + ")"
    return f"INSERT OR IGNORE INTO {table}({columns}) VALUES {','.join([one] * n)}"


SCHEMA = f"""
CREATE TABLE namespace (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created REAL NOT NULL
);
CREATE TABLE entry (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ns INTEGER NOT NULL,
    title_fp,  -- untyped (no affinity): INTEGER for <= 64 bits, BLOB for 128
    body_fp,
    first_seen REAL NOT NULL,  -- whole POSIX seconds (values.whole_seconds()): a 4-byte integer on disk
    url TEXT,
    url_key INTEGER,  -- 32-bit digest of (namespace, url): what entry_url indexes (values.url_key())
    title TEXT,
    numbers BLOB,  -- number signature (rule.numbers_agree), 4 bytes a hash; NULL: added without one
    sentences BLOB,  -- the first 4 bytes of each sampled sentence hash (sentences.py), NULL: none
    short INTEGER,  -- digest of a body too short to fingerprint; NULL: none
    chars TEXT  -- a short body's character key (text/similarity.py); NULL: not a short body
);
CREATE INDEX entry_title ON entry({fp_key_sql("title_fp")}, first_seen) WHERE title_fp IS NOT NULL;
CREATE INDEX entry_body ON entry({fp_key_sql("body_fp")}, first_seen) WHERE body_fp IS NOT NULL;
CREATE INDEX entry_seen ON entry(ns, first_seen);
CREATE INDEX entry_url ON entry(url_key) WHERE url_key IS NOT NULL;
CREATE TABLE band (
    key INTEGER NOT NULL,
    fp NOT NULL,
    PRIMARY KEY (key, fp)
) WITHOUT ROWID;
CREATE TABLE band2 (
    key INTEGER NOT NULL,  -- a split bucket's sub-bucket: (namespace id, tier, path, hash) (dense.py)
    fp NOT NULL,
    PRIMARY KEY (key, fp)
) WITHOUT ROWID;
CREATE TABLE decision (
    ns INTEGER NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL,
    tier TEXT NOT NULL,
    distance INTEGER NOT NULL,
    original INTEGER,
    decided_at REAL NOT NULL,
    title TEXT,
    score REAL,  -- the character similarity that confirmed a short body's match; NULL: none
    PRIMARY KEY (ns, url)
) WITHOUT ROWID;
CREATE INDEX decision_recent ON decision(ns, decided_at);
CREATE TABLE sentence (
    key INTEGER NOT NULL,  -- a sampled sentence hash XOR its namespace's mask (sentences.py)
    entry INTEGER NOT NULL,
    PRIMARY KEY (key, entry)
) WITHOUT ROWID;
CREATE TABLE pending (
    entry INTEGER PRIMARY KEY,
    owner TEXT NOT NULL
);
CREATE INDEX pending_owner ON pending(owner);
CREATE TABLE request (
    token TEXT PRIMARY KEY,
    entry INTEGER NOT NULL,
    tier TEXT,
    distance INTEGER,
    at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX request_at ON request(at);
CREATE TABLE run (
    ns INTEGER NOT NULL,
    id TEXT NOT NULL,
    started REAL NOT NULL,
    record TEXT NOT NULL,  -- the whole run as JSON (runs.Run.to_json)
    PRIMARY KEY (ns, id)
) WITHOUT ROWID;
CREATE INDEX run_started ON run(ns, started);
"""
#: Seconds a request token is kept (a resend comes as soon as a fresh worker process is up).
REQUEST_TTL = 600
