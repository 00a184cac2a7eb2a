"""scrapy_simhash.fingerprint"""
