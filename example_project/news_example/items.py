"""Item definitions of the example project."""

import scrapy


class NewsItem(scrapy.Item):
    """One news article as the spider extracts it.

    scrapy-simhash reads ``title``, ``body`` and ``url`` (its default field names); ``body`` may be
    an HTML fragment: the plugin strips tags, scripts and ads' markup itself.
    """

    url = scrapy.Field()
    title = scrapy.Field()
    body = scrapy.Field()  # HTML fragment of the article text
    published = scrapy.Field()  # the date as the page prints it (2020年07月04日, July 4, 2020, ...)
    portal = scrapy.Field()  # which site (selector set) the article came from
    # Filled by scrapy-simhash only with SIMHASH_BODY_ACTION = "flag": the verdict of a near-duplicate
    # that was passed on for review instead of dropped (tier, distance, original URL).
    simhash = scrapy.Field()
    # Filled by scrapy-simhash on every admitted item: its story key (SIMHASH_STORY_FIELD), the same
    # whenever the same text is admitted again; a store that upserts on it stores each story once.
    simhash_story = scrapy.Field()


class ReviewItem(scrapy.Item):
    """One review (or comment, or reply) as the ``reviews`` spider extracts it: one text, no title.

    scrapy-simhash reads ``text`` (one of its default body field names) and ``url``.
    """

    url = scrapy.Field()  # the page's URL with the review's anchor (#r07)
    text = scrapy.Field()
    author = scrapy.Field()  # the name the review was posted under
    posted = scrapy.Field()  # the date the page gives
    simhash = scrapy.Field()
    simhash_story = scrapy.Field()
