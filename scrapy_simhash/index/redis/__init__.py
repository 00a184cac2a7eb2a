"""scrapy_simhash.index.redis"""
