"""scrapy_simhash.scrapy"""
