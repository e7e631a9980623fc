"""Ferry on Apache Spark.

Ferry's own connectors and transforms (the Rust crates, through the native module
``ferry_spark._native``) run inside Spark's Python workers as Spark Python data sources;
``ferry_spark.driver`` builds the Spark plan of a SeaTunnel job file. ``ferry run JOB
--engine spark`` launches the driver; see docs/spark.md.
"""
