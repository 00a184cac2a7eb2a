"""The Scrapy glue: the pipeline (:mod:`.pipeline`), the add-on (:mod:`.addon`), ``scrapy simhash``
(:mod:`.commands`), the drops (:mod:`.drops`), what became of each item downstream (:mod:`.delivery`),
the end-of-crawl summary (:mod:`.summary`), and futures of other threads awaited in the reactor
(:mod:`.awaiting`). Everything else works without Scrapy."""
