"""``python -m ferry_spark``: the Spark driver (see ``ferry_spark.driver``)."""

import sys

from ferry_spark.driver import main

sys.exit(main(sys.argv[1:]))
