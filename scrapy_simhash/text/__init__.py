"""scrapy_simhash.text"""
