"""Every setting's default value, in one place (the scrapy-redis habit).

:mod:`.settings` describes each setting once (its name, how it is read and checked, what it feeds)
with the default from here; the engine's keyword defaults and the command line's option defaults
are these too, so they cannot drift. The documentation's settings reference is made from that table,
so it shows these values. A tuned value names the decision record that holds its evidence.
"""

from __future__ import annotations

from typing import Final

# Plain constants only: the command line imports this module and must start without jieba or Scrapy.

ENABLED = True
#: ``"news"``: articles with a title and a body; ``"short"``: comments, reviews, posts and replies
#: (:data:`SHORT_PROFILE` gives its defaults; docs/decisions/0531-short-profile.md).
PROFILE = "news"
#: None → ``sqlite:///<project>/.scrapy/simhash/index.sqlite3``, shared by all spiders of the project.
INDEX_URL: str | None = None
INDEX_FILENAME = "index.sqlite3"
NAMESPACE = "default"
TITLE_FIELD: str | list[str] = "title"
BODY_FIELD: str | list[str] = ["body", "content", "text"]
URL_FIELD: str | list[str] = "url"
#: Title tier: titles within this many bits are one story (docs/decisions/0500-title-max-distance.md).
TITLE_MAX_DISTANCE = 2
#: Body tier: bodies within this many bits are one story (docs/decisions/0501-body-max-distance.md).
BODY_MAX_DISTANCE = 3
BITS = 64
#: Body features kept per fingerprint, the heaviest (docs/decisions/0502-top-k.md).
TOP_K = 64
#: Cap of any one body feature's share of the body's weight (None: no cap), so that no single repeated
#: word decides a fingerprint (docs/decisions/0503-max-share.md).
MAX_SHARE: float | None = 0.1
TITLE_ACTION: Final = "drop"
BODY_ACTION: Final = "drop"
FLAG_FIELD = "simhash"
#: The field that receives an admitted item's story key (the same for the same text admitted again:
#: a storage pipeline that upserts on it stores a story once, even when a crash made it pass twice).
STORY_FIELD: str | None = "simhash_story"
TTL_DAYS: float | None = None
RESET = False
DROP_LOG_LEVEL = "INFO"
USER_DICT: str | None = None
STOP_WORDS: str | list[str] | None = None
DYNAMIC_THRESHOLD = False
TITLE_PATTERNS: list[str] = []
#: Bodies reduced to their main text: True every HTML body, False none, None those that look like a
#: whole page or a link-dense block.
MAIN_CONTENT: bool | None = None
SKIP_FIELD = "simhash_skip"
#: What a check-and-add that cannot be committed (disk full, lock held past the busy timeout, file
#: gone read-only) does to the item once the retries are spent: "drop" it (never passed on as new
#: without being in the index), "pass" it on unchecked, marked in the flag field, or "close" the
#: spider (the item is dropped, and the crawl stops with reason ``simhash_index_error``).
ON_INDEX_ERROR = "drop"
INDEX_RETRIES = 3
#: Seconds before the first retry; doubled for each further one (0.25, 0.5, 1.0 …).
INDEX_RETRY_DELAY = 0.25
#: Seconds a check-and-add waits for another process's write lock before it counts as failed.
BUSY_TIMEOUT = 30.0
#: Title-tier number guard: a title match counts only if the bodies' numbers overlap by this percent
#: (0 turns the guard off; docs/decisions/0504-title-numbers.md).
TITLE_NUMBERS = 70
#: Sentence tier: an earlier item more than this percent of whose sampled sentences are in this item
#: is a duplicate (0: off). Catches edited reposts (docs/decisions/0505-sentences-shared.md).
SENTENCES_SHARED = 50
#: Extra keyword arguments for the Redis client (like scrapy-redis's REDIS_PARAMS).
REDIS_PARAMS: dict[str, object] = {}
#: A Redis server that may evict keys (``maxmemory-policy allkeys-*``) or does not persist (no AOF,
#: no RDB snapshots): ``"refuse"`` to open the index there, or ``"warn"`` and use it.
REDIS_UNSAFE = "refuse"
#: Fingerprint worker processes: None → the cores there are, minus one for the crawl (at least 1);
#: 0 → fingerprint on a thread of the crawl process.
WORKERS: int | None = None
#: Seconds a call to a worker (its items' fingerprints and check-and-adds, index waits included) may
#: go unanswered before the worker is taken for stuck: the pool is killed and replaced, and the call's
#: items are sent again (docs/decisions/0410-worker-timeout.md).
WORKER_TIMEOUT = 60.0
#: Items the pipeline holds at once, awaiting a verdict; items yielded by ``start()`` wait while the
#: item pipelines hold this many. None: 64 per worker process, at least 256
#: (docs/decisions/0411-items-awaiting.md).
MAX_AWAITING: int | None = None
#: Print what the plugin did (kept, dropped per tier, flagged, the index) when the crawl ends.
SUMMARY = True
#: The command line skips (and counts) an input line longer than this, without loading it whole.
MAX_LINE_BYTES = 50_000_000

# Monitors (scrapy_simhash.monitoring, Spidermon; docs/monitoring.md, docs/decisions/0800-monitor-defaults.md)
#: Finished runs of the same spider whose dedup rates make the band a run is compared with.
MONITOR_RUNS = 10
#: Fewer earlier runs than this: the dedup-rate monitor has no band yet and passes.
MONITOR_MIN_RUNS = 3
#: How far (a share, 0 to 1) a run's dedup rate may be from the median of the band's runs.
MONITOR_DEDUP_TOLERANCE = 0.15
#: The decision latency's 95th percentile above this many milliseconds fails the latency monitor.
MONITOR_LATENCY_P95_MS = 2000.0
#: More check-and-adds that failed than this fails the index-error monitor.
MONITOR_MAX_INDEX_ERRORS = 0
#: More items passed on unchecked than this fails the unchecked monitor.
MONITOR_MAX_UNCHECKED = 0
#: More fingerprint workers that died than this fails the workers monitor.
MONITOR_MAX_WORKERS_DIED = 0
#: The short profile's defaults (``SIMHASH_PROFILE = "short"``), under every setting a project does
#: not set itself: the original design's parameters for short comments (32-bit fingerprints,
#: distance 5, confirmed by characters), one text field, no sentence tier (different reviews share
#: a sentence), and its own index file and namespace, so that it never mixes with articles'
#: fingerprints (docs/decisions/0531-short-profile.md).
SHORT_PROFILE: Final = {
    "SIMHASH_BITS": 32,
    "SIMHASH_BODY_MAX_DISTANCE": 5,
    "SIMHASH_SENTENCES_SHARED": 0,
    "SIMHASH_NAMESPACE": "short",
    "SIMHASH_BODY_FIELD": ["text", "content", "comment", "review", "body"],
}
#: The short profile's default index file (next to the articles' one).
SHORT_INDEX_FILENAME = "short.sqlite3"
#: A file of spam patterns (one a line: a phrase, or ``re:`` and a regular expression), or None.
SPAM_PATTERNS: str | None = None
#: What a spam pattern's match does: ``"count"``, ``"flag"`` or ``"drop"``.
SPAM_ACTION = "count"
#: The item field naming an item's author or IP (None: no per-author check).
AUTHOR_FIELD: str | None = None
#: Seconds within which an author's consecutive items are compared with the stricter threshold.
AUTHOR_WINDOW = 3600.0
