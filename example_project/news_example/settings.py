# Scrapy settings for the news_example project (made like `scrapy startproject` makes them).
#
# Only the settings this example uses are listed. All of Scrapy's settings:
#     https://docs.scrapy.org/en/latest/topics/settings.html

BOT_NAME = "news_example"

SPIDER_MODULES = ["news_example.spiders"]
NEWSPIDER_MODULE = "news_example.spiders"

# --- scrapy-simhash ------------------------------------------------------------------------------
# One line enables the plugin: it adds scrapy_simhash.SimhashPipeline before the storage pipelines.
ADDONS = {
    "scrapy_simhash.Addon": 300,
}

# Where the index of already-seen stories lives. Default (None): an SQLite file under this project's
# .scrapy/simhash/, shared by every spider of the project, kept between runs. Point several crawler
# machines at one Redis instead: "redis://localhost:6379/0"; or another file: "sqlite:////abs/path.sqlite3".
# SIMHASH_INDEX_URL = None

# Start with an empty index for this run (`scrapy crawl news -s SIMHASH_RESET=1`).
# SIMHASH_RESET = False

# The first two tiers (the third, on shared sentences: SIMHASH_SENTENCES_SHARED). A title within this many
# bits (of 64) of an earlier title is a repost ("title tier"); raise it to catch more rewritten headlines, at
# the price of merging short, similar headlines.
# SIMHASH_TITLE_MAX_DISTANCE = 2
# Otherwise a body within this many bits of an earlier body is a repost ("body tier").
# SIMHASH_BODY_MAX_DISTANCE = 3

# What to do with a body-tier or sentence-tier match: "drop" it, or "flag" it: pass it on with the verdict in
# the item's `simhash` field (see items.py), for a human to review.
# SIMHASH_BODY_ACTION = "drop"

# Forget stories older than this many days (None: keep them forever).
# SIMHASH_TTL_DAYS = None

# Which item fields hold the text (defaults shown).
# SIMHASH_TITLE_FIELD = "title"
# SIMHASH_BODY_FIELD = ["body", "content", "text"]

# Log level of the one-line message per dropped (or flagged) item: its URL, tier, distance, original URL.
# SIMHASH_DROP_LOG_LEVEL = "INFO"

# INFO shows the plugin's opening line and one "Dropped: near-duplicate <url>: <tier> tier, distance <n>,
# original <url>" line per repost, without Scrapy's DEBUG line for every page and item.
LOG_LEVEL = "INFO"

# Kept items go to news.jsonl (overwritten on every run); dropped reposts never reach it.
FEEDS = {
    "news.jsonl": {"format": "jsonlines", "encoding": "utf8", "overwrite": True},
}

# The add-on also prints "kept / dropped by title / dropped by body / flagged / index location" when
# the crawl ends (scrapy_simhash.DedupSummary); turn it off with:
# SIMHASH_SUMMARY = False

# --- the spider ----------------------------------------------------------------------------------
# Per-portal CSS selectors, merged over the spider's built-in ones (see spiders/news.py), e.g.:
# NEWS_SELECTORS = {
#     "mysite": {"list": "ul.articles a::attr(href)", "title": "h1::text", "body": "div.article-body",
#                "published": "time::attr(datetime)"},
# }
# and run: scrapy crawl news -a start_url=https://example.com/news/ -a portal=mysite

# Fetch one article at a time, in list order, each only after the previous one went through the
# pipeline: the first-published copy of a story then always reaches the index first. Turn it off
# for speed on real sites, where arrival order is not something to rely on anyway.
NEWS_SEQUENTIAL = True

# --- polite defaults for real sites --------------------------------------------------------------
ROBOTSTXT_OBEY = False  # the bundled site has no robots.txt; set True before crawling real sites
USER_AGENT = "news_example (+https://github.com/scrapy-simhash/scrapy-simhash)"
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 1
# ...but no delay for the bundled site, which the spider serves itself on 127.0.0.1.
DOWNLOAD_SLOTS = {"127.0.0.1": {"delay": 0}}
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False

FEED_EXPORT_ENCODING = "utf-8"
