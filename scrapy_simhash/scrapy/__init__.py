"""The Scrapy glue: the pipeline (:mod:`.pipeline`), the add-on (:mod:`.addon`), ``scrapy simhash``
(:mod:`.commands`), the drops (:mod:`.drops`), the fields it reads and writes (:mod:`.fields`), what
became of each item downstream (:mod:`.delivery`), the end-of-crawl summary (:mod:`.summary`), a crawl
refused before it starts (:mod:`.refusal`), the start requests held back while items wait
(:mod:`.backpressure`), and futures of other threads awaited in the reactor (:mod:`.awaiting`).
Everything else works without Scrapy."""
