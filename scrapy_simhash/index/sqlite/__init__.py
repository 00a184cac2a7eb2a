"""The SQLite backend: the index in one file, shared by every process that opens it.

Along the data path: :mod:`.index` (:class:`~.index.SqliteIndex`, the public API: the connection, its
lock and a transaction an operation) runs the rule over :mod:`.tables` (what is stored where, band keys,
the rule's Store) and the SQL of :mod:`.maintain` (removing entries, summing up a namespace); :mod:`.dense`
splits crowded band buckets, :mod:`.sentences` keeps the sentence samples, :mod:`.values` maps values to
columns. :mod:`.file` makes, checks and opens the file (:mod:`.schema` holds its SQL, :mod:`.checks` the
rows' consistency at open, :mod:`.wal` checks a pending WAL, :mod:`.fd` reads bytes without dropping
locks), and :mod:`.reband` rebuilds its band rows.
"""
