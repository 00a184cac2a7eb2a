"""The Redis backend: the index on a server many crawlers share. It stores; :mod:`..rule` decides.

:mod:`.index` (:class:`~.index.RedisIndex`, the public API) runs the rule in optimistic transactions
over :mod:`.store` (the keys and the rule's Store over them) and :mod:`.records` (an entry's record);
:mod:`.client` connects, retries and reads many hash fields in one call (``read.lua``, a read-only
script); :mod:`.guard` keeps the index from answering from a server that forgot or from state that
cannot be right; :mod:`.maintain` removes entries and reads the index whole; :mod:`.reband` rebuilds
its band buckets for other thresholds.
"""
