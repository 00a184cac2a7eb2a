"""scrapy_simhash.index.sqlite"""
