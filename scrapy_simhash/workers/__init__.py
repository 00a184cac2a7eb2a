"""scrapy_simhash.workers"""
