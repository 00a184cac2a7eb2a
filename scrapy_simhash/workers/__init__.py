"""Work off the crawl's own core: one pool of worker processes (:mod:`.pool`, their side in
:mod:`.process`) that serves the pipeline (:mod:`.fingerprints`) and ``dedup --jobs``, and the group
commit that decides items arriving together in one index transaction (:mod:`.groupcommit`)."""
