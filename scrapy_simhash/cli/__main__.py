"""``python -m scrapy_simhash.cli``: the ``scrapy-simhash`` command."""

import sys

from . import main

sys.exit(main())
