"""The Spark driver of a Ferry job.

``python -m ferry_spark JOB [options]`` (what ``ferry run JOB --engine spark`` runs)
reads the job file through the native module, which plans it exactly as the ``ferry``
binary does (``ferry_plan``: "plan" is that plan only), and builds the Spark job from it:
a data frame per Ferry source, ``mapInArrow`` per transform (Ferry's transform code), a
write per sink. BATCH jobs run as bounded Spark
jobs; STREAMING jobs as one streaming query per sink, micro-batch = checkpoint.

Where a source's rows flow through transforms that nothing else reads (a chain, see
``ferry_plan::Chain``), the source's read task applies them itself, and in batch
mode writes to the chain's sink too, so that rows cross between the JVM and Python
less often, or never (``FERRY_SPARK_FUSE=0`` turns this off).

``--manifest FILE`` runs several BATCH jobs in one Spark session, one JSON object a line
(``{"name": ..., "job": path, "vars": ["k=v", ...]}``), and prints ``ok NAME SECONDS`` or
``FAILED NAME: message`` per job: the test suite uses it to pay Spark's start-up once.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time


def _args(argv):
    p = argparse.ArgumentParser(prog="ferry run --engine spark", description=__doc__.split("\n\n")[0])
    p.add_argument("job", nargs="?", help="the job file")
    p.add_argument("-i", "--variable", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("-p", "--parallelism", type=int)
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--job-id")
    p.add_argument("--checkpoint-dir", help="directory of job directories (Spark checkpoint locations)")
    p.add_argument("--from-scratch", action="store_true", help="set the job's old history aside and start anew")
    p.add_argument("--manifest", help="run the BATCH jobs listed in this file in one session")
    a = p.parse_args(argv)
    if not a.job and not a.manifest:
        p.error("give a job file or --manifest")
    return a


def _say(msg):
    print("ferry: " + msg, file=sys.stderr, flush=True)


def _class_data_sharing():
    """Starts the driver's JVM from the class-data-sharing archive that
    ``scripts/setup-spark`` made (``ferry-spark.jsa`` in this environment, or
    ``$FERRY_SPARK_CDS``; ``off`` turns it off): the JVM maps the classes a Spark session
    loads instead of reading and verifying them from the jars, which took a third of a
    small job's time on 2 cores (24 s → 16 s for ten rows). A stale archive (another JDK,
    other jars) is refused by the JVM with a warning and the classes load as usual; an
    archive that was cut short would crash the JVM, which is why setup-spark writes it
    under another name, starts a session from it and only then renames it. Options the
    user gave in ``SPARK_SUBMIT_OPTS`` stay; an archive named there wins."""
    archive = os.environ.get("FERRY_SPARK_CDS") or os.path.join(sys.prefix, "ferry-spark.jsa")
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if archive == "off" or "SharedArchiveFile" in opts or "ArchiveClassesAtExit" in opts:
        return
    if not os.path.isfile(archive) or " " in archive:
        return
    os.environ["SPARK_SUBMIT_OPTS"] = (opts + " -XX:SharedArchiveFile=" + archive).strip()


def session(master, conf=None):
    """A Spark session set up for Ferry: UTC session time zone (timestamps cross as UTC),
    large Arrow batches, the executors' Python = this Python (it has the native module).
    ``conf`` is the job file's ``spark.*`` env options (as SeaTunnel's Spark engine uses
    them); ``--master`` and ``FERRY_SPARK_MASTER`` win over its ``spark.master``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ferry_spark.datasource import register

    started = time.monotonic()
    _class_data_sharing()
    conf = dict(conf or {})
    job_master = conf.pop("spark.master", None)
    master = master or os.environ.get("FERRY_SPARK_MASTER") or job_master or "local[*]"
    if master.startswith("local"):
        # A host name that resolves to a loopback address makes Spark warn and guess.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (
        SparkSession.builder.appName(conf.pop("spark.app.name", "ferry"))
        .master(master)
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stopTimeout", "30s")
        # Each task attempt stages its own output; speculative duplicates are not needed.
        .config("spark.speculation", "false")
    )
    for k, v in conf.items():
        b = b.config(k, v)
    # Timestamps cross between Ferry and Spark as UTC; another zone would shift them.
    b = b.config("spark.sql.session.timeZone", "UTC")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    _say("Spark %s session started in %.1f s" % (spark.version, time.monotonic() - started))
    return spark


def fusing():
    """Whether chains run fused (``FERRY_SPARK_FUSE=0`` turns it off: every transform a
    ``mapInArrow`` step, every sink a Spark write, to compare or to isolate a problem)."""
    return os.environ.get("FERRY_SPARK_FUSE", "1") != "0"


# What a fused batch task returns: its sink's prepared commit and the rows it wrote.
_COMMIT_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "info", "type": "string", "nullable": True, "metadata": {}},
        {"name": "rows", "type": "long", "nullable": False, "metadata": {}},
    ],
}


def _load(spark, spec, source, schema, streaming, location, budget_ms, transforms=(), sink=None, writers=1):
    reader = spark.readStream if streaming else spark.read
    r = reader.format("ferry_source").option("spec", spec).option("source", str(source))
    r = r.option("schema", json.dumps(schema)).option("transforms", json.dumps(list(transforms)))
    if sink is not None:
        r = r.option("sink", str(sink)).option("writers", str(writers))
    if streaming:
        r = r.option("location", location).option("budget_ms", json.dumps(budget_ms))
    return r.load()


# The columns of a stream of several tables (``ferry_spark::convert::StreamCodec``): the
# row's table by position, one struct column per table, the row kind.
_TABLE = "__ferry_table"
_KIND = "__ferry_row_kind"


def _quoted(name):
    return "`" + name.replace("`", "``") + "`"


def _table_counts(plan):
    """How many tables each stream carries, by stream name."""
    counts = {s["output"]: len(s["tables"]) for s in plan["sources"]}
    counts.update({t["output"]: len(t["tables"]) for t in plan["transforms"]})
    return counts


def _as_part_of(df, tables, offset, target):
    """``df`` (a stream of ``tables`` tables) as rows of the union ``target`` (a Spark
    schema of several tables), its tables at positions ``offset``, ``offset + 1``, ...:
    a one-table stream's columns go into one struct column, a multi-table stream's struct
    columns move to their positions; the other tables' columns are null."""
    from pyspark.sql import functions as F

    slots = target.fields[1:-1]
    if tables == 1:
        data = [F.col(_quoted(c)) for c in df.columns if c != _KIND]
        position = F.lit(offset).cast("int")
        own = {offset: F.struct(*data)}
    else:
        position = (F.col(_TABLE) + F.lit(offset)).cast("int")
        own = {offset + i: F.col("__ferry_t%d" % i) for i in range(tables)}
    cols = [position.alias(_TABLE)]
    for j, f in enumerate(slots):
        cols.append(own.get(j, F.lit(None).cast(f.dataType)).alias(f.name))
    cols.append(F.col(_KIND))
    return df.select(*cols)


def _input(streams, plan, node):
    """The data frame plugin ``node`` (a transform or sink) reads: its input stream, or
    the union of its input streams, as SeaTunnel and the embedded engine take it (each
    row keeps its table)."""
    inputs = node["inputs"]
    if len(inputs) == 1:
        return streams[inputs[0]]
    from pyspark.sql.types import StructType

    target = StructType.fromJson(node["input_schema"])
    counts = _table_counts(plan)
    union, offset = None, 0
    for name in inputs:
        part = _as_part_of(streams[name], counts[name], offset, target)
        offset += counts[name]
        union = part if union is None else union.unionAll(part)
    return union


def _frames(spark, spec, plan, streaming, location, budget_ms):
    """The data frame of every stream of the job, by stream name. A chain's transforms run
    inside its source's read task, whose data frame is the chain's output stream (stream
    names are unique, and nothing else reads the streams inside a chain)."""
    from pyspark.sql.types import StructType

    from ferry_spark.datasource import transform_function

    chains = {c["source"]: c for c in plan["chains"]} if fusing() else {}
    fused = {t for c in chains.values() for t in c["transforms"]}
    streams = {}
    for s in plan["sources"]:
        c = chains.get(s["index"])
        ts = c["transforms"] if c else []
        schema = plan["transforms"][ts[-1]]["schema"] if ts else s["schema"]
        streams[c["output"] if c else s["output"]] = _load(
            spark, spec, s["index"], schema, streaming, location, budget_ms, ts
        )
    for t in plan["transforms"]:
        if t["index"] not in fused:
            df = _input(streams, plan, t)
            streams[t["output"]] = df.mapInArrow(transform_function(spec, t["index"]), StructType.fromJson(t["schema"]))
    return streams


def _run_fused(spark, spec, chain):
    """Runs a chain that ends in a sink as one Spark job whose tasks read, transform and
    write; rows never enter the JVM. Tasks prepare the sink's commit and return it; the
    driver publishes all of them once (what a Spark write's commit step does)."""
    from ferry_spark import _native

    sink = chain["sink"]
    df = _load(spark, spec, chain["source"], _COMMIT_SCHEMA, False, None, 0, chain["transforms"], sink)
    infos = [r[0] for r in df.collect() if r[0] is not None]
    try:
        _native.commit(spec, sink, 1, infos, None, True)
    except BaseException:
        _native.abort(spec, sink, 1, infos)
        raise


def _sink_chains(plan):
    """The chains that end in a sink, by sink index (none when fusing is off)."""
    return {c["sink"]: c for c in plan["chains"] if c["sink"] is not None} if fusing() else {}


def run_batch(spark, spec, plan):
    chains = _sink_chains(plan)
    streams = _frames(spark, spec, plan, False, None, 0)
    for k in plan["sinks"]:
        if k["index"] in chains:
            _run_fused(spark, spec, chains[k["index"]])
            continue
        df = _input(streams, plan, k)
        (
            df.write.format("ferry_sink")
            .option("spec", spec)
            .option("sink", str(k["index"]))
            .option("parallelism", str(k["parallelism"]))
            .mode("append")
            .save()
        )


class _Stop:
    """Stop requests: SIGTERM/SIGINT and the ``control`` file that ``ferry savepoint``
    and ``ferry cancel`` write, by the ``ferry`` binary's rules (``ferry_plan::stop``,
    through the native module; this class only passes signals on). Made before the job
    shows as RUNNING (a request that arrives while the Spark session starts waits for the
    query); a request left by an earlier run is dropped."""

    def __init__(self, job_dir):
        from ferry_spark import _native

        self._requests = _native.StopRequests(job_dir)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._signal)

    def _signal(self, *_):
        if self._requests.signal():
            _say("stop requested; stopping after the current micro-batch commits")

    def poll(self):
        return self._requests.poll()


def _last_batch(q):
    p = q.lastProgress
    return None if p is None else p.get("batchId")


def _latest_log_entry(location, log):
    """The highest batch id in Spark's ``offsets`` or ``commits`` log at ``location``
    (``None`` when empty): files named by the batch id, written atomically."""
    try:
        ids = [int(n) for n in os.listdir(os.path.join(location, log)) if n.isdigit()]
    except OSError:
        return None
    return max(ids) if ids else None


def _committed_since(location, target):
    """Whether micro-batch ``target`` (``None``: nothing planned) has committed."""
    if target is None:
        return True
    done = _latest_log_entry(location, "commits")
    return done is not None and done >= target


def run_streaming(spark, spec, plan, job_dir, on_batch=None, stop=None):
    """Runs a STREAMING job until stopped; returns 'savepoint' or 'cancel'. ``on_batch``
    is called after micro-batches complete; ``stop`` watches for stop requests (made
    here when not given)."""
    # The planner's schedule (ferry_plan::CheckpointSettings::micro_batch): a micro-batch
    # every trigger_ms, each read for read_budget_ms or, when that is null
    # (checkpoint.interval = 0), until its readers have caught up.
    trigger_ms = plan["micro_batch"]["trigger_ms"]
    budget_ms = plan["micro_batch"]["read_budget_ms"]
    sinks = plan["sinks"]
    chains = _sink_chains(plan)
    queries = []
    stop = stop or _Stop(job_dir)
    for k in sinks:
        # Spark's checkpoint location: beside, not in, the job directory, whose `state`
        # file (for `ferry jobs`) Spark would take for its own state store.
        location = os.path.join(job_dir, "query-%d" % k["index"])
        from ferry_spark import _native

        recovered = _native.recover_commits(spec, k["index"], os.path.join(location, "published", str(k["index"])))
        if recovered:
            _say("finished %d commit(s) of sink %s that a crash interrupted" % (recovered, k["label"]))
        chain = chains.get(k["index"])
        if chain is not None:
            # Read tasks run the whole chain and return prepared commits; the writer
            # passes them to the per-batch commit.
            writers = plan["sources"][chain["source"]]["parallelism"]
            df = _load(spark, spec, chain["source"], _COMMIT_SCHEMA, True, location, budget_ms,
                       chain["transforms"], k["index"], writers)
        else:
            df = _input(_frames(spark, spec, plan, True, location, budget_ms), plan, k)
        q = (
            df.writeStream.format("ferry_sink")
            .option("spec", spec)
            .option("sink", str(k["index"]))
            .option("parallelism", str(k["parallelism"]))
            .option("commits", "1" if chain is not None else "0")
            .option("location", location)
            .option("checkpointLocation", location)
            .trigger(processingTime="%d milliseconds" % trigger_ms)
            .start()
        )
        queries.append(q)
    locations = [os.path.join(job_dir, "query-%d" % k["index"]) for k in sinks]
    # Per query, the last micro-batch planned when the savepoint was asked for.
    targets = None
    seen = None

    def savepoint_complete():
        return all(_committed_since(loc, t) for loc, t in zip(locations, targets))

    while True:
        progress = [_last_batch(q) for q in queries]
        if on_batch is not None and progress != seen:
            seen = progress
            on_batch()
        for q in queries:
            if not q.isActive:
                exc = q.exception()
                for other in queries:
                    other.stop()
                if exc is not None:
                    raise exc
                if targets is not None and not savepoint_complete():
                    raise RuntimeError(_incomplete(locations, targets))
                return "savepoint"
        req = stop.poll()
        if req == "cancel":
            for q in queries:
                q.stop()
            return "cancel"
        if req == "savepoint":
            if targets is None:
                # Everything read before the request is in the micro-batches planned by
                # then, which Spark logs in offsets/ before they run (after a restart,
                # also the batch the last run planned and did not commit, which Spark
                # runs again first). The savepoint is those batches' commits.
                targets = [_latest_log_entry(loc, "offsets") for loc in locations]
            if savepoint_complete():
                for q in queries:
                    q.stop()
                return "savepoint"
        time.sleep(0.2)


def _incomplete(locations, targets):
    """Why a savepoint failed: the micro-batches it waited for that did not commit."""
    missing = [
        "micro-batch %d of %s" % (t, os.path.basename(loc))
        for loc, t in zip(locations, targets)
        if not _committed_since(loc, t)
    ]
    return "the streaming query stopped before the savepoint completed: %s did not commit" % ", ".join(missing)


def _error_text(e):
    from ferry_spark.datasource import first_ferry_error

    return first_ferry_error(e) or str(e).strip().split("\n")[0]


def run_one(spark_holder, a):
    from ferry_spark import _native

    spec, plan = _native.load_job(a.job, a.variable, a.parallelism, a.job_id)
    plan = json.loads(plan)
    for w in plan.get("warnings", []):
        print("warning: " + w, file=sys.stderr)
    delivery = plan["delivery"] + (" (%s)" % plan["delivery_reason"] if plan["delivery_reason"] else "")
    _say("job '%s' (%s) on Spark, delivery %s" % (plan["name"], plan["mode"], delivery))
    streaming = plan["mode"] == "STREAMING"
    job_dir = None
    job_lock = None
    temp_dir = None
    stop = None
    if a.job_id or a.checkpoint_dir:
        base = a.checkpoint_dir or _native.default_checkpoint_dir()
        # The job directory's lock, held until the run ends: a second run of the same job
        # id fails here, before Spark starts (the kernel releases it if this process dies).
        job_dir, changes, discarded, job_lock = _native.open_job_dir(base, spec, a.from_scratch)
        if discarded:
            _say("--from-scratch: job '%s' starts anew; its old history is in %s" % (plan["job_id"], discarded))
        for change in changes:
            _say("job file changed since the last run: " + change)
        stop = _Stop(job_dir) if streaming else None
        _native.set_state(job_dir, plan["job_id"], "RUNNING", os.getpid())
    elif streaming:
        # Spark needs a checkpoint location even when the job cannot be resumed.
        temp_dir = tempfile.mkdtemp(prefix="ferry-spark-")
        stop = _Stop(None)
    started = time.monotonic()
    final = "FAILED"
    try:
        # The sinks' targets (tables, save modes) are prepared once, here on the driver,
        # before any Spark task writes.
        _native.setup_sinks(spec, job_dir or "")
        spark = spark_holder(plan.get("spark_conf"))
        if streaming:
            def on_batch():
                if job_dir:
                    _native.set_state(job_dir, plan["job_id"], "RUNNING", os.getpid())

            outcome = run_streaming(spark, spec, plan, job_dir or temp_dir, on_batch, stop)
            final = "SAVEPOINT" if outcome == "savepoint" else "CANCELLED"
        else:
            run_batch(spark, spec, plan)
            final = "FINISHED"
    finally:
        if job_dir:
            _native.set_state(job_dir, plan["job_id"], final, os.getpid())
            job_lock.release()
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
    secs = time.monotonic() - started
    if final == "CANCELLED":
        _say("job '%s' cancelled after %.2f s" % (plan["name"], secs))
        return 130
    what = "stopped with a savepoint" if final == "SAVEPOINT" else "finished"
    _say("job '%s' %s in %.2f s" % (plan["name"], what, secs))
    return 0


def run_manifest(a):
    spark = session(a.master)
    failures = 0
    with open(a.manifest) as f:
        entries = [json.loads(l) for l in f if l.strip()]
    for e in entries:
        one = argparse.Namespace(job=e["job"], variable=e.get("vars", []), parallelism=None, job_id=None, checkpoint_dir=None,
                                 from_scratch=False)
        started = time.monotonic()
        try:
            run_one(lambda _conf: spark, one)
            print("ok %s %.2f" % (e["name"], time.monotonic() - started), flush=True)
        except Exception as ex:  # one case's failure must not stop the others
            failures += 1
            print("FAILED %s: %s" % (e["name"], _error_text(ex)), flush=True)
    spark.stop()
    return 1 if failures else 0


def main(argv):
    a = _args(argv)
    try:
        if a.manifest:
            return run_manifest(a)
        holder = {}

        def get(conf):
            if "s" not in holder:
                holder["s"] = session(a.master, conf)
            return holder["s"]

        try:
            return run_one(get, a)
        finally:
            if "s" in holder:
                holder["s"].stop()
    except Exception as e:
        print("error: " + _error_text(e), file=sys.stderr)
        return 1
