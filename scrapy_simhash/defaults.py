"""Every setting name and default value, in one place (the scrapy-redis habit).

The README's settings table lists the same names; ``tests/test_settings_doc.py`` checks they agree.
"""

from __future__ import annotations

# Plain constants only: the command line imports this module and must start without jieba or Scrapy.

ENABLED = True
#: None → ``sqlite:///<project>/.scrapy/simhash/index.sqlite3``, shared by all spiders of the project.
INDEX_URL: str | None = None
INDEX_FILENAME = "index.sqlite3"
NAMESPACE = "default"
TITLE_FIELD: str | list[str] = "title"
BODY_FIELD: str | list[str] = ["body", "content", "text"]
URL_FIELD: str | list[str] = "url"
TITLE_MAX_DISTANCE = 2
BODY_MAX_DISTANCE = 3
BITS = 64
TOP_K = 64
TITLE_ACTION = "drop"
BODY_ACTION = "drop"
FLAG_FIELD = "simhash"
TTL_DAYS: float | None = None
RESET = False
DROP_LOG_LEVEL = "INFO"
USER_DICT: str | None = None
STOP_WORDS: str | list[str] | None = None
DYNAMIC_THRESHOLD = False
TITLE_PATTERNS: list[str] = []
MAIN_CONTENT = False
SKIP_FIELD = "simhash_skip"
#: What a check-and-add that cannot be committed (disk full, lock held past the busy timeout, file
#: gone read-only) does to the item once the retries are spent: "drop" it (never passed on as new
#: without being in the index) or "pass" it on unchecked, marked in the flag field.
ON_INDEX_ERROR = "drop"
INDEX_RETRIES = 3
#: Seconds before the first retry; doubled for each further one (0.25, 0.5, 1.0 …).
INDEX_RETRY_DELAY = 0.25
#: Seconds a check-and-add waits for another process's write lock before it counts as failed.
BUSY_TIMEOUT = 30.0
#: Title-tier number guard: a title match counts only if the bodies' numbers overlap by this percent
#: (0 turns the guard off).
TITLE_NUMBERS = 70
#: Opt-in sentence tier: an earlier item more than this percent of whose sampled sentences are in
#: this item is a duplicate (0: off; 50 recommended).
SENTENCES_SHARED = 0
#: Extra keyword arguments for the Redis client (like scrapy-redis's REDIS_PARAMS).
REDIS_PARAMS: dict[str, object] = {}

#: Setting name → default. Spider attributes ``simhash_<name>`` (lower case, without the prefix)
#: override the settings marked per-spider below.
SETTINGS: dict[str, object] = {
    "SIMHASH_ENABLED": ENABLED,
    "SIMHASH_INDEX_URL": INDEX_URL,
    "SIMHASH_NAMESPACE": NAMESPACE,
    "SIMHASH_TITLE_FIELD": TITLE_FIELD,
    "SIMHASH_BODY_FIELD": BODY_FIELD,
    "SIMHASH_URL_FIELD": URL_FIELD,
    "SIMHASH_TITLE_MAX_DISTANCE": TITLE_MAX_DISTANCE,
    "SIMHASH_BODY_MAX_DISTANCE": BODY_MAX_DISTANCE,
    "SIMHASH_BITS": BITS,
    "SIMHASH_TOP_K": TOP_K,
    "SIMHASH_TITLE_ACTION": TITLE_ACTION,
    "SIMHASH_BODY_ACTION": BODY_ACTION,
    "SIMHASH_FLAG_FIELD": FLAG_FIELD,
    "SIMHASH_TTL_DAYS": TTL_DAYS,
    "SIMHASH_RESET": RESET,
    "SIMHASH_DROP_LOG_LEVEL": DROP_LOG_LEVEL,
    "SIMHASH_USER_DICT": USER_DICT,
    "SIMHASH_STOP_WORDS": STOP_WORDS,
    "SIMHASH_DYNAMIC_THRESHOLD": DYNAMIC_THRESHOLD,
    "SIMHASH_TITLE_PATTERNS": TITLE_PATTERNS,
    "SIMHASH_MAIN_CONTENT": MAIN_CONTENT,
    "SIMHASH_SKIP_FIELD": SKIP_FIELD,
    "SIMHASH_ON_INDEX_ERROR": ON_INDEX_ERROR,
    "SIMHASH_INDEX_RETRIES": INDEX_RETRIES,
    "SIMHASH_INDEX_RETRY_DELAY": INDEX_RETRY_DELAY,
    "SIMHASH_BUSY_TIMEOUT": BUSY_TIMEOUT,
    "SIMHASH_TITLE_NUMBERS": TITLE_NUMBERS,
    "SIMHASH_SENTENCES_SHARED": SENTENCES_SHARED,
    "SIMHASH_REDIS_PARAMS": REDIS_PARAMS,
}

#: Settings a spider may override with an attribute or ``-a simhash_<name>=...``.
PER_SPIDER = (
    "SIMHASH_ENABLED",
    "SIMHASH_NAMESPACE",
    "SIMHASH_RESET",
    "SIMHASH_TITLE_FIELD",
    "SIMHASH_BODY_FIELD",
    "SIMHASH_URL_FIELD",
    "SIMHASH_TITLE_ACTION",
    "SIMHASH_BODY_ACTION",
    "SIMHASH_TTL_DAYS",
)

#: Stats keys.
STAT_PREFIX = "simhash"
