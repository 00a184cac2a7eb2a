"""Example Scrapy project for scrapy-simhash: a news spider over a bundled offline site of reposts."""
