"""The peer tools' side of each workload, one process per run.

    python peers.py TASK ARGS...

Each task does the work the way a user of that tool would write it, and nothing else; the
harness times the whole process (start-up included, as for Ferry) and checks the output
itself. Imports are inside the tasks so that a task pays only for its own tool.
"""

import sys

SCHEMA_SQL = "id BIGINT, user_id INT, event_type STRING, amount DOUBLE, ts TIMESTAMP, note STRING"
EVENT_TYPES = ["view", "click", "add_to_cart", "purchase", "refund", "signup", "login", "logout"]
# Workload 2's generated table: the same six columns, computed from the row number.
GEN_DUCKDB = (
    "SELECT range AS id, (range * 7919 % 1000000)::INT AS user_id, "
    "['view','click','add_to_cart','purchase','refund','signup','login','logout'][range % 8 + 1] AS event_type, "
    "(range * 48271 % 50000) / 100.0 AS amount, "
    "TIMESTAMP '2024-01-01' + to_seconds(range * 2654435761 % 31622400) AS ts, "
    "'note #' || (range % 100000)::VARCHAR AS note FROM range({n})"
)
GEN_AGG = "count(*), sum(user_id), max(event_type), sum(amount), max(ts), max(note)"


# ---------------------------------------------------------------- workload 1: CSV -> Parquet

def csv2pq_duckdb(src, out):
    import duckdb
    con = duckdb.connect()
    con.execute(
        f"""COPY (SELECT * FROM read_csv('{src}', header = true, columns = {{
              'id': 'BIGINT', 'user_id': 'INTEGER', 'event_type': 'VARCHAR', 'amount': 'DOUBLE',
              'ts': 'TIMESTAMP', 'note': 'VARCHAR'}}, timestampformat = '%Y-%m-%d %H:%M:%S')
            WHERE amount > 10)
          TO '{out}/part-0.parquet' (FORMAT parquet, COMPRESSION snappy)"""
    )


def csv2pq_polars(src, out):
    import polars as pl
    schema = {"id": pl.Int64, "user_id": pl.Int32, "event_type": pl.String, "amount": pl.Float64,
              "ts": pl.Datetime("us"), "note": pl.String}
    (pl.scan_csv(src, schema=schema)
       .filter(pl.col("amount") > 10)
       .sink_parquet(f"{out}/part-0.parquet", compression="snappy"))


def csv2pq_pyarrow(src, out):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    types = {"id": pa.int64(), "user_id": pa.int32(), "event_type": pa.string(),
             "amount": pa.float64(), "ts": pa.timestamp("us"), "note": pa.string()}
    reader = pcsv.open_csv(src, convert_options=pcsv.ConvertOptions(column_types=types))
    with pq.ParquetWriter(f"{out}/part-0.parquet", reader.schema, compression="snappy") as w:
        for batch in reader:
            w.write_batch(batch.filter(pc.greater(batch["amount"], 10)))


def spark_session(app):
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            # Without this Spark writes the legacy INT96 timestamps.
            .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            .config("spark.driver.memory", "4g")
            .getOrCreate())


def csv2pq_spark(src, out):
    spark = spark_session("csv2pq")
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.csv(src, header=True, schema=SCHEMA_SQL, timestampFormat="yyyy-MM-dd HH:mm:ss")
    df.filter("amount > 10").write.mode("overwrite").option("compression", "snappy").parquet(out)
    spark.stop()


def csv2pq_flink(src, out):
    # Runs in the Flink venv. No Parquet jar offline, so Flink writes CSV; its CSV reader
    # cannot skip the header (the header row fails to parse and is dropped), and ts is read
    # as text and converted in the query.
    from pyflink.table import EnvironmentSettings, TableEnvironment
    t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t.get_config().set("parallelism.default", "2")
    t.execute_sql(f"""CREATE TABLE src (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts STRING, note STRING) WITH ('connector' = 'filesystem', 'path' = 'file://{src}',
        'format' = 'csv', 'csv.ignore-parse-errors' = 'true')""")
    t.execute_sql(f"""CREATE TABLE dst (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts TIMESTAMP(0), note STRING) WITH ('connector' = 'filesystem', 'path' = 'file://{out}',
        'format' = 'csv')""")
    t.execute_sql("""INSERT INTO dst SELECT id, user_id, event_type, amount, TO_TIMESTAMP(ts), note
        FROM src WHERE amount > 10 AND id IS NOT NULL""").wait()


def csv2pq_duckdb_iso(src, out):
    # Workload 7's file: ISO timestamps with a 'T', read with the pattern a user writes.
    import duckdb
    con = duckdb.connect()
    con.execute(
        f"""COPY (SELECT * FROM read_csv('{src}', header = true, columns = {{
              'id': 'BIGINT', 'user_id': 'INTEGER', 'event_type': 'VARCHAR', 'amount': 'DOUBLE',
              'ts': 'TIMESTAMP', 'note': 'VARCHAR'}}, timestampformat = '%Y-%m-%dT%H:%M:%S')
            WHERE amount > 10)
          TO '{out}/part-0.parquet' (FORMAT parquet, COMPRESSION snappy)"""
    )


# -------------------------------------------------------- workload 6: JSON lines -> Parquet

def json2pq_duckdb(src, out):
    import duckdb
    con = duckdb.connect()
    con.execute(
        f"""COPY (SELECT * FROM read_json('{src}', format = 'newline_delimited', columns = {{
              'id': 'BIGINT', 'user_id': 'INTEGER', 'event_type': 'VARCHAR', 'amount': 'DOUBLE',
              'ts': 'TIMESTAMP', 'note': 'VARCHAR'}}, timestampformat = '%Y-%m-%d %H:%M:%S'))
          TO '{out}/part-0.parquet' (FORMAT parquet, COMPRESSION snappy)"""
    )


def json2pq_polars(src, out):
    import polars as pl
    schema = {"id": pl.Int64, "user_id": pl.Int32, "event_type": pl.String, "amount": pl.Float64,
              "ts": pl.String, "note": pl.String}
    (pl.scan_ndjson(src, schema=schema)
       .with_columns(pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="us"))
       .sink_parquet(f"{out}/part-0.parquet", compression="snappy"))


# ------------------------------------------------------- workload 2: generation -> blackhole

def gen_duckdb(n):
    import duckdb
    print(duckdb.connect().execute(f"SELECT {GEN_AGG} FROM ({GEN_DUCKDB.format(n=n)})").fetchone()[0])


def gen_polars(n):
    import polars as pl
    i = pl.int_range(0, n, dtype=pl.Int64)
    lf = pl.LazyFrame().select(i.alias("id")).select(
        pl.col("id"),
        (pl.col("id") * 7919 % 1_000_000).cast(pl.Int32).alias("user_id"),
        pl.lit(pl.Series(EVENT_TYPES)).gather(pl.col("id") % 8).alias("event_type"),
        ((pl.col("id") * 48271 % 50_000) / 100.0).alias("amount"),
        (pl.lit(1704067200_000_000, dtype=pl.Int64) + (pl.col("id") * 2654435761 % 31_622_400) * 1_000_000)
        .cast(pl.Datetime("us")).alias("ts"),
        (pl.lit("note #") + (pl.col("id") % 100_000).cast(pl.String)).alias("note"),
    )
    out = lf.select(pl.len(), pl.col("user_id").sum(), pl.col("event_type").max(),
                    pl.col("amount").sum(), pl.col("ts").max(), pl.col("note").max()).collect()
    print(out.item(0, 0))


def gen_spark(n):
    spark = spark_session("gen")
    spark.sparkContext.setLogLevel("ERROR")
    (spark.range(n).selectExpr(
        "id", "cast(id * 7919 % 1000000 as int) as user_id",
        "element_at(array('view','click','add_to_cart','purchase','refund','signup','login','logout'), cast(id % 8 + 1 as int)) as event_type",
        "(id * 48271 % 50000) / 100.0 as amount",
        "timestamp_seconds(1704067200 + id * 2654435761 % 31622400) as ts",
        "concat('note #', cast(id % 100000 as string)) as note")
     .write.format("noop").mode("overwrite").save())
    spark.stop()
    print(n)


def gen_flink(n):
    from pyflink.table import EnvironmentSettings, TableEnvironment
    t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t.get_config().set("parallelism.default", "2")
    t.execute_sql(f"""CREATE TABLE src (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts TIMESTAMP(3), note STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '{n}',
        'rows-per-second' = '1000000000',
        'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{n}',
        'fields.event_type.length' = '8', 'fields.note.length' = '20')""")
    t.execute_sql("""CREATE TABLE dst (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts TIMESTAMP(3), note STRING) WITH ('connector' = 'blackhole')""")
    t.execute_sql("INSERT INTO dst SELECT * FROM src").wait()
    print(n)


# ----------------------------------------------------------------------- workload 4: startup

def tiny_duckdb():
    import duckdb
    duckdb.connect().execute("SELECT * FROM range(10)").fetchall()


def tiny_polars():
    import polars as pl
    pl.LazyFrame({"id": list(range(10))}).collect()


def tiny_spark():
    spark = spark_session("tiny")
    spark.range(10).collect()
    spark.stop()


def tiny_flink():
    from pyflink.table import EnvironmentSettings, TableEnvironment
    t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t.execute_sql("CREATE TABLE dst (id INT) WITH ('connector' = 'blackhole')")
    t.execute_sql("INSERT INTO dst SELECT * FROM (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)) AS v(id)").wait()


# ----------------------------------------------------- streaming: a directory -> Parquet

def _wait_for_sigterm():
    """Blocks until SIGTERM/SIGINT: the harness stops a streaming peer once every row it
    dropped is committed."""
    import signal
    import threading
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def stream_spark(src, out, ck):
    # Spark Structured Streaming, file source -> file sink, a micro-batch every second.
    # The file sink commits a batch by writing its file list to out/_spark_metadata.
    stop = _wait_for_sigterm()
    spark = spark_session("stream")
    spark.sparkContext.setLogLevel("ERROR")
    df = (spark.readStream.schema(SCHEMA_SQL).option("header", True)
          .option("timestampFormat", "yyyy-MM-dd HH:mm:ss").csv(src))
    q = (df.writeStream.format("parquet").option("compression", "snappy")
         .option("path", out).option("checkpointLocation", ck)
         .trigger(processingTime="1 second").start())
    while q.isActive and not stop.wait(0.2):
        pass
    failed = q.exception()
    q.stop()
    spark.stop()
    if failed is not None:
        sys.exit(f"query failed: {failed}")


def stream_flink(src, out):
    # PyFlink Table API in streaming mode: the filesystem source watches the directory,
    # the filesystem sink commits part files on checkpoints (every second). Runs in the
    # Flink venv; CSV out (no Parquet jar offline), header rows dropped as in csv2pq_flink.
    # A row-format sink only rolls files by size or time: without a 1 s rollover, part files
    # would stay in progress (uncommitted) for the default 30 minutes.
    stop = _wait_for_sigterm()
    from pyflink.table import EnvironmentSettings, TableEnvironment
    t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    c = t.get_config()
    c.set("parallelism.default", "2")
    c.set("execution.checkpointing.interval", "1s")
    t.execute_sql(f"""CREATE TABLE src (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts STRING, note STRING) WITH ('connector' = 'filesystem', 'path' = 'file://{src}',
        'format' = 'csv', 'csv.ignore-parse-errors' = 'true', 'source.monitor-interval' = '200ms')""")
    t.execute_sql(f"""CREATE TABLE dst (id BIGINT, user_id INT, event_type STRING, amount DOUBLE,
        ts TIMESTAMP(0), note STRING) WITH ('connector' = 'filesystem', 'path' = 'file://{out}',
        'format' = 'csv', 'sink.rolling-policy.rollover-interval' = '1s',
        'sink.rolling-policy.check-interval' = '1s')""")
    r = t.execute_sql("""INSERT INTO dst SELECT id, user_id, event_type, amount, TO_TIMESTAMP(ts), note
        FROM src WHERE id IS NOT NULL""")
    client = r.get_job_client()
    while not stop.wait(1.0):
        status = client.get_job_status().result().name
        if status in ("FAILED", "CANCELED", "FINISHED"):
            sys.exit(f"flink job {status}")
    client.cancel().result()


# ---------------------------------------------- workload 8: PostgreSQL table -> Parquet

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"


def pg2pq_duckdb(table, out):
    # DuckDB's postgres scanner from PyPI (duckdb-extension-postgres, which pins duckdb 1.5.5,
    # so it runs in bench/.venv-pgscan). The wheel ships the file as postgres.duckdb_extension,
    # whose name does not match its entry point; setup_env.sh copies it under its real name.
    import duckdb
    ext = f"{sys.prefix}/ext/postgres_scanner.duckdb_extension"
    con = duckdb.connect()
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{PG_DSN}' AS pg (TYPE postgres, READ_ONLY)")
    con.execute(f"COPY (SELECT * FROM pg.{table}) TO '{out}/part-0.parquet' (FORMAT parquet, COMPRESSION snappy)")


def pg2pq_adbc(table, out):
    # ADBC's PostgreSQL driver (libpq, binary COPY under the hood) streaming Arrow batches
    # into pyarrow's ParquetWriter.
    import adbc_driver_postgresql.dbapi as adbc
    import pyarrow.parquet as pq
    with adbc.connect("postgresql://postgres@127.0.0.1:5432/test") as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        reader = cur.fetch_record_batch()
        with pq.ParquetWriter(f"{out}/part-0.parquet", reader.schema, compression="snappy") as w:
            for batch in reader:
                w.write_batch(batch)


if __name__ == "__main__":
    task = globals()[sys.argv[1].replace("-", "_")]
    args = [int(a) if a.isdigit() else a for a in sys.argv[2:]]
    task(*args)
