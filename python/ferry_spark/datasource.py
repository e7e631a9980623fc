"""Ferry sources and sinks as Spark Python data sources.

Everything a worker needs travels as text in the data source's options and partitions:
the job spec (job file text and variables, from which every worker builds the same plan
as the ``ferry`` binary), the plugin's index, and split states. Native objects are made
lazily inside ``read``/``write`` and on the driver side, never pickled.

Options of both data sources:
  spec      the job spec (JSON text from ``_native.load_job``)
  source / sink   the plugin's index in the job file
  location  the checkpoint location (streaming)

Options of ``ferry_source`` for a chain (``ferry_spark::job::Chain``):
  transforms  JSON list of the transforms the reader applies itself, in order
  sink        the sink the read task writes to itself: each partition then returns one
              row, (commit info, rows written); in batch mode the driver commits them, in
              streaming mode ``ferry_sink`` with ``commits = 1`` does
  writers     with ``sink``: how many writers the sink has (the source's partitions)
"""

import json
import os
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType


def _native():
    # Imported where it runs: Spark's Python workers import this module too.
    from ferry_spark import _native

    return _native


class FerrySource(DataSource):
    """A Ferry source of the job: ``spark.read.format("ferry_source")``."""

    @classmethod
    def name(cls):
        return "ferry_source"

    def schema(self):
        return StructType.fromJson(json.loads(self.options["schema"]))

    def _transforms(self):
        return json.loads(self.options.get("transforms", "[]"))

    def reader(self, schema):
        sink = self.options.get("sink")
        return _BatchReader(
            self.options["spec"], int(self.options["source"]), self._transforms(), None if sink is None else int(sink)
        )

    def streamReader(self, schema):
        sink = self.options.get("sink")
        return _StreamReader(
            self.options["spec"],
            int(self.options["source"]),
            self.options["location"],
            # The plan's micro-batch read budget (ms), or null: read until caught up.
            json.loads(self.options.get("budget_ms", "10000")),
            int(self.options.get("max_rows", "10000000")),
            self._transforms(),
            None if sink is None else (int(sink), int(self.options.get("writers", "1"))),
        )


@dataclass
class _SplitsPartition(InputPartition):
    subtask: int
    splits: str
    count: int


@dataclass
class _StreamPartition(InputPartition):
    descriptor: str


class _BatchReader(DataSourceReader):
    def __init__(self, spec: str, source: int, transforms: List[int], sink: Optional[int]):
        self.spec = spec
        self.source = source
        self.transforms = transforms
        self.sink = sink

    def partitions(self):
        splits = _native().batch_splits(self.spec, self.source)
        return [_SplitsPartition(i, s, len(splits)) for i, s in enumerate(splits)]

    def read(self, partition):
        n = _native()
        if self.sink is None:
            yield from n.SourcePartition.batch(self.spec, self.source, partition.subtask, partition.splits, self.transforms)
            return
        # The whole chain in this task: read, transform, write and prepare the commit.
        attempt = _batch_attempt()
        yield n.run_chain(
            self.spec,
            self.source,
            partition.subtask,
            partition.splits,
            self.transforms,
            self.sink,
            partition.count,
            attempt,
        )


class _StreamReader(DataSourceStreamReader):
    """Offsets are the readers' split states (see crates/ferry-spark/src/source.rs)."""

    def __init__(self, spec, source, location, budget_ms, max_rows, transforms, sink):
        self.spec = spec
        self.source = source
        self.location = location
        self.budget_ms = budget_ms
        self.max_rows = max_rows
        self.transforms = transforms
        # (sink index, writers) when the whole chain runs in the read task.
        self.sink = sink
        self._offsets = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_offsets"] = None
        return state

    def _stream_offsets(self):
        if self._offsets is None:
            self._offsets = _native().StreamSource(self.spec, self.source, self.location)
        return self._offsets

    def initialOffset(self):
        return json.loads(_native().StreamSource.initial_offset(self.source))

    def latestOffset(self):
        return json.loads(self._stream_offsets().latest_offset())

    def partitions(self, start, end):
        if start == end:
            return []
        descriptors = _native().StreamSource.partitions(json.dumps(end), self.location, self.budget_ms, self.max_rows)
        return [_StreamPartition(d) for d in descriptors]

    def read(self, partition):
        if self.sink is None:
            yield from _native().SourcePartition.stream(self.spec, partition.descriptor, self.transforms)
            return
        # The whole chain in this task; staged as the sink's own write task would stage it.
        batch, attempt = _stream_attempt()
        sink, writers = self.sink
        yield _native().run_chain_stream(
            self.spec, partition.descriptor, self.transforms, sink, writers, attempt, batch + 1
        )

    def commit(self, end):
        # Nothing to acknowledge: a partition's reader learns that the previous batch
        # committed when it continues with the next one.
        pass


@dataclass
class FerryCommit(WriterCommitMessage):
    """What one write task prepared: the sink's commit infos (JSON texts)."""

    infos: List[str] = field(default_factory=list)
    rows: int = 0


def _infos(messages) -> List[str]:
    out = []
    for m in messages:
        if m is not None:
            out.extend(m.infos)
    return out


def _write(spec: str, sink: int, parallelism: int, iterator, checkpoint_id: int, attempt: str) -> FerryCommit:
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    writer = _native().Writer(spec, sink, partition, parallelism, attempt)
    try:
        for batch in iterator:
            writer.write(batch)
        info = writer.prepare(checkpoint_id)
    except BaseException:
        writer.abort()
        raise
    return FerryCommit([info] if info is not None else [], writer.rows())


class FerrySink(DataSource):
    """A Ferry sink of the job: ``df.write.format("ferry_sink")``."""

    @classmethod
    def name(cls):
        return "ferry_sink"

    def writer(self, schema, overwrite):
        return _BatchWriter(self.options["spec"], int(self.options["sink"]), int(self.options.get("parallelism", "1")))

    def streamWriter(self, schema, overwrite):
        return _StreamWriter(
            self.options["spec"],
            int(self.options["sink"]),
            int(self.options.get("parallelism", "1")),
            self.options["location"],
            self.options.get("commits") == "1",
        )


class _BatchWriter(DataSourceArrowWriter):
    """A bounded job is one checkpoint: prepared in the tasks, committed and finished
    (the Assert sink's final checks) once on the driver."""

    def __init__(self, spec: str, sink: int, parallelism: int):
        self.spec = spec
        self.sink = sink
        self.parallelism = parallelism

    def write(self, iterator):
        return _write(self.spec, self.sink, self.parallelism, iterator, 1, _batch_attempt())

    def commit(self, messages):
        _native().commit(self.spec, self.sink, 1, _infos(messages), None, True)

    def abort(self, messages):
        _native().abort(self.spec, self.sink, 1, _infos(messages))


def _query_id(location: str) -> str:
    with open(os.path.join(location, "metadata")) as f:
        return json.loads(f.readline())["id"]


def _batch_attempt() -> str:
    """A name for the running Spark task attempt of a batch job (staged output of
    attempts never collides)."""
    ctx = TaskContext.get()
    return "spark-%d-%d-%d" % (ctx.stageId(), ctx.partitionId(), ctx.attemptNumber()) if ctx else "spark"


def _stream_attempt():
    """The micro-batch of the running Spark task and a name for its attempt."""
    ctx = TaskContext.get()
    batch = int(ctx.getLocalProperty("streaming.sql.batchId"))
    query = ctx.getLocalProperty("sql.streaming.queryId") or "query"
    return batch, "%s-%d-%d-%d" % (query[:8], batch, ctx.partitionId(), ctx.attemptNumber())


class _StreamWriter(DataSourceStreamArrowWriter):
    """Micro-batch ``b`` is Ferry checkpoint ``b + 1``. Tasks stage and prepare; the
    driver-side commit publishes once per (query, batch) and records it. With
    ``commits``, the rows are prepared commits of fused read tasks (``ferry_source`` with
    ``sink``), passed on to the commit step."""

    def __init__(self, spec: str, sink: int, parallelism: int, location: str, commits: bool = False):
        self.spec = spec
        self.sink = sink
        self.parallelism = parallelism
        self.location = location
        self.commits = commits

    def write(self, iterator):
        if self.commits:
            infos, rows = [], 0
            for b in iterator:
                infos.extend(i for i in b.column(0).to_pylist() if i is not None)
                rows += sum(b.column(1).to_pylist())
            return FerryCommit(infos, rows)
        batch, attempt = _stream_attempt()
        return _write(self.spec, self.sink, self.parallelism, iterator, batch + 1, attempt)

    def _record(self, batch_id: int) -> str:
        return os.path.join(self.location, "published", str(self.sink), "%s-%d" % (_query_id(self.location), batch_id))

    def commit(self, messages, batchId):
        _native().commit(self.spec, self.sink, batchId + 1, _infos(messages), self._record(batchId), False)

    def abort(self, messages, batchId):
        _native().abort(self.spec, self.sink, batchId + 1, _infos(messages))


def transform_function(spec: str, index: int):
    """The ``mapInArrow`` function of transform ``index``: Ferry's own transform code."""

    def run(batches: Iterator) -> Iterator:
        t = _native().Transform(spec, index)
        for b in batches:
            out = t.apply(b)
            if out is not None:
                yield out

    return run


def register(spark) -> None:
    """Registers the Ferry data sources with ``spark``."""
    spark.dataSource.register(FerrySource)
    spark.dataSource.register(FerrySink)


def first_ferry_error(e: BaseException) -> Optional[str]:
    """Ferry's own message inside a Spark error (which wraps it in JVM and Python
    tracebacks), if there is one."""
    text = str(e)
    marker = "FerryError: "
    i = text.find(marker)
    if i < 0:
        return None
    line = text[i + len(marker):].split("\n", 1)[0].strip()
    return line or None
