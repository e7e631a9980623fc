#!/usr/bin/env python3
"""Kafka produce and consume: Ferry beside librdkafka's own clients on one broker.

Issue 16's benchmark: N records of 100-byte JSON produced into a topic and consumed from
one, by Ferry (FakeSource or a JSON-lines file → Kafka; Kafka → Blackhole, Kafka →
Parquet) and by the clients a user would reach for instead: confluent-kafka (librdkafka's
Python client, from PyPI) and kcat (built against librdkafka 2.12 by bench/setup_kcat.sh:
Debian's kcat links librdkafka 2.0, which cannot talk to Tansu). Every run is a fresh
process timed from start to exit, rounds interleaved, medians reported with min–max; the
records each run produced or consumed are counted from the broker or the tool, never
assumed.

    bench/kafka.py [--records 10000000] [--rounds 3] [--name kafka] [--tools kcat,confluent]

Needs a broker on 127.0.0.1:9092 (`scripts/test-services` starts Tansu), a release build
of Ferry (`FERRY_BIN`, default ~/.cache/ferry/target-release/release/ferry) and a Python
with confluent-kafka and psutil (`python3 -m venv V && V/bin/pip install confluent-kafka
psutil`, then run this script with V/bin/python). kcat is `KCAT`, else
~/.cache/ferry/kcat/bin/kcat (bench/setup_kcat.sh builds it), else kcat on the PATH; without
one that reaches the broker its rows are left out, with the reason. Writes
bench/results/<name>.md/.json.
"""

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import measure  # noqa: E402

SERVERS = "127.0.0.1:9092"
FERRY = os.environ.get(
    "FERRY_BIN", str(Path.home() / ".cache/ferry/target-release/release/ferry"))
KCAT_BUILT = Path.home() / ".cache/ferry/kcat/bin/kcat"
KCAT = os.environ.get("KCAT") or (
    str(KCAT_BUILT) if KCAT_BUILT.exists() else shutil.which("kcat") or "kcat")


_ADMIN = []


def admin():
    """One client for the run (a future outlives nothing that destroyed its client)."""
    if not _ADMIN:
        from confluent_kafka.admin import AdminClient
        _ADMIN.append(AdminClient({"bootstrap.servers": SERVERS}))
    return _ADMIN[0]


def create_topic(name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic
    for f in admin().create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()


def delete_topic(name: str) -> None:
    try:
        for f in admin().delete_topics([name]).values():
            f.result()
    except Exception as e:  # a broker that cannot delete only keeps the memory
        print(f"bench: could not delete {name}: {e}")


def records_in(topic: str, partitions: int) -> int:
    """Records in `topic`, counted by reading it to the end (not from offsets: the test
    broker's end offsets are right only for one-record batches)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": SERVERS, "group.id": f"count-{topic}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, eof = 0, set()
    while len(eof) < partitions:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            n += 1
    c.close()
    return n


def make_lines(path: Path, n: int) -> None:
    """n JSON lines of exactly 100 bytes (99 and a newline), `{"id": i, "payload": …}`."""
    if path.exists() and path.stat().st_size == n * 100:
        return
    with open(path, "w") as f:
        for i in range(n):
            head = f'{{"id":{i},"payload":"p{i}'
            f.write(head + "x" * (99 - len(head) - 2) + '"}\n')


PRODUCE_PY = r'''
import sys, confluent_kafka as ck
p = ck.Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 5})
with open(sys.argv[3], "rb") as f:
    for line in f:
        while True:
            try:
                p.produce(sys.argv[2], line[:-1])
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
p.flush()
'''

CONSUME_PY = r'''
import sys, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": "bench-" + sys.argv[2],
                 "enable.auto.commit": False, "enable.partition.eof": True,
                 "auto.offset.reset": "earliest",
                 "fetch.queue.backoff.ms": int(sys.argv[4]) if len(sys.argv) > 4 else 1000})
parts = int(sys.argv[3])
c.assign([ck.TopicPartition(sys.argv[2], p, 0) for p in range(parts)])
n, eof = 0, set()
while len(eof) < parts:
    for m in c.consume(10000, 1.0):
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        n += 1
print(f"consumed {n}")
'''


def ferry_job(path: Path, source: str, sink: str, parallelism: int) -> Path:
    path.write_text(
        f'env {{ job.mode = "BATCH", parallelism = {parallelism} }}\n'
        f"source {{ {source} }}\nsink {{ {sink} }}\n")
    return path


def kcat_works() -> str:
    """Empty when kcat can talk to the broker, else why not."""
    if not shutil.which(KCAT):
        return (f"kcat is not installed ({KCAT} not found: run bench/setup_kcat.sh, "
                "or set KCAT)")
    r = subprocess.run([KCAT, "-b", SERVERS, "-L", "-m", "5"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or ["no output"])[0]
        return f"kcat could not reach the broker: {first[:300]}"
    return ""


def kcat_version() -> str:
    r = subprocess.run([KCAT, "-V"], capture_output=True, text=True)
    m = re.search(r"Version (\S+) .*librdkafka (\S+)", r.stdout)
    return f"{m.group(1)} (librdkafka {m.group(2)}, {KCAT})" if m else "unknown"


def consumed(name: str, run) -> int:
    """Records a consume run reports: kcat's rows print `wc -l` of its output (one line per
    record) and nothing else on stdout; Ferry prints `read N`, consume.py `consumed N`."""
    if name.startswith("kcat"):
        m = re.fullmatch(r"\s*(\d+)\s*", run.stdout)
    else:
        text = run.stdout + run.stderr
        m = re.search(r"read (\d+)", text) or re.search(r"consumed (\d+)", text)
    return int(m.group(1)) if m else 0


def rate(n, secs):
    return n / secs if secs > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--name", default="kafka")
    ap.add_argument("--tools", default="",
                    help="comma-separated substrings: run only the rows whose name has one "
                         "(e.g. kcat,confluent); default: all")
    args = ap.parse_args()
    wanted = [t.strip().lower() for t in args.tools.split(",") if t.strip()]

    def pick(rows: dict) -> dict:
        return {k: v for k, v in rows.items()
                if not wanted or any(w in k.lower() for w in wanted)}

    n, parts = args.records, args.partitions
    work = HERE / "data" / "kafka"
    work.mkdir(parents=True, exist_ok=True)
    lines = work / f"lines-{n}.jsonl"
    make_lines(lines, n)
    py = sys.executable
    (work / "produce.py").write_text(PRODUCE_PY)
    (work / "consume.py").write_text(CONSUME_PY)
    kcat_reason = kcat_works()
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    schema = 'schema = { fields { id = bigint, payload = string } }'

    # ---- produce: each run into a fresh topic, counted afterwards
    producers = {
        "ferry FakeSource → Kafka": lambda t: [FERRY, "run", str(ferry_job(
            work / "fake.conf",
            f'FakeSource {{ row.num = {n}, split.num = 1, string.length = 76, {schema} }}',
            f'Kafka {{ bootstrap.servers = "{SERVERS}", topic = "{t}" }}', 1))],
        "ferry JSON lines → Kafka": lambda t: [FERRY, "run", str(ferry_job(
            work / "file.conf",
            f'LocalFile {{ path = "{lines}", file_format_type = json, {schema} }}',
            f'Kafka {{ bootstrap.servers = "{SERVERS}", topic = "{t}" }}', 1))],
        "confluent-kafka (Python)": lambda t: [py, str(work / "produce.py"), SERVERS, t,
                                              str(lines)],
    }
    if not kcat_reason:
        # -l: the file's lines, each a record without its newline (as produce.py sends them).
        producers["kcat -P -l"] = lambda t: [KCAT, "-P", "-b", SERVERS,
                                             "-t", t, "-l", str(lines)]
    producers = pick(producers)
    results = {"produce": {k: [] for k in producers}, "consume": {}}
    names = list(producers)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            topic = f"bench-produce-{stamp}-{r}-{abs(hash(name)) % 10**6}"
            create_topic(topic, parts)
            run = measure(producers[name](topic), workdir=work)
            got = records_in(topic, parts)
            print(f"bench: produce {name}: {run.wall:.2f} s, {got:,} records, rc {run.rc}")
            results["produce"][name].append(
                {"wall": run.wall, "peak_mb": run.peak_mb, "cpu": run.cpu, "rc": run.rc,
                 "records": got, "other_cores": run.other_cores,
                 "stderr": run.stderr[-500:] if run.rc else ""})
            delete_topic(topic)

    # ---- consume: one topic of n records, produced by confluent-kafka one record per
    # request batch is not needed here; Ferry's bounded read ends at the broker's end
    # offsets, counted from its own output.
    source_topic = f"bench-consume-{stamp}"
    create_topic(source_topic, parts)
    subprocess.run([py, str(work / "produce.py"), SERVERS, source_topic, str(lines)],
                   check=True)
    present = records_in(source_topic, parts)
    kafka_src = (f'Kafka {{ bootstrap.servers = "{SERVERS}", topic = "{source_topic}", '
                 f'start_mode = earliest, {schema} }}')
    out_dir = work / "parquet-out"
    consumers = {
        "ferry Kafka → Blackhole": [FERRY, "run", str(ferry_job(
            work / "blackhole.conf", kafka_src, "Blackhole {}", parts))],
        "ferry Kafka → Parquet": [FERRY, "run", str(ferry_job(
            work / "parquet.conf", kafka_src,
            f'LocalFile {{ path = "{out_dir}", file_format_type = parquet }}', parts))],
        "confluent-kafka (Python)": [py, str(work / "consume.py"), SERVERS, source_topic,
                                     str(parts)],
        # Ferry's consumers use a 10 ms fetch.queue.backoff.ms: the same setting for the peer.
        "confluent-kafka (Python), fetch.queue.backoff.ms=10": [
            py, str(work / "consume.py"), SERVERS, source_topic, str(parts), "10"],
    }
    if not kcat_reason:
        # Every partition from its first offset to its end (-e: exit there), each value printed
        # with kcat's default format, the value and "\n" (-D), into `wc -l`; pipefail makes a
        # failing kcat fail the run. librdkafka's own defaults (fetch.queue.backoff.ms = 1000),
        # and again with the 10 ms backoff that Ferry's consumers use.
        kcat_c = (f"set -o pipefail; {shlex.quote(KCAT)} -C -b {SERVERS} -t {source_topic} "
                  "-o beginning -e -q")
        consumers["kcat -C -e"] = ["bash", "-c", f"{kcat_c} | wc -l"]
        consumers["kcat -C -e, fetch.queue.backoff.ms=10"] = [
            "bash", "-c", f"{kcat_c} -X fetch.queue.backoff.ms=10 | wc -l"]
    consumers = pick(consumers)
    results["consume"] = {k: [] for k in consumers}
    names = list(consumers)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            shutil.rmtree(out_dir, ignore_errors=True)
            run = measure(consumers[name], workdir=work)
            got = consumed(name, run)
            print(f"bench: consume {name}: {run.wall:.2f} s, {got:,} records, rc {run.rc}")
            results["consume"][name].append(
                {"wall": run.wall, "peak_mb": run.peak_mb, "cpu": run.cpu, "rc": run.rc,
                 "records": got, "other_cores": run.other_cores,
                 "stderr": run.stderr[-500:] if run.rc else ""})
    delete_topic(source_topic)

    cmd = "bench/kafka.py " + " ".join(sys.argv[1:])
    ran_ferry = any(k.startswith("ferry") for p in results.values() for k in p)
    ferry_version = (subprocess.run([FERRY, "--version"], capture_output=True,
                                    text=True).stdout.strip() if ran_ferry else "not run")
    import confluent_kafka
    rep = {"command": cmd, "records": n, "partitions": parts, "rounds": args.rounds,
           "present_in_consume_topic": present, "results": results,
           "kcat": kcat_reason or "used", "when": stamp,
           "versions": {"ferry": ferry_version,
                        "confluent-kafka": confluent_kafka.__version__,
                        "librdkafka (confluent-kafka)": confluent_kafka.libversion()[0],
                        "kcat": kcat_version() if not kcat_reason else "not run",
                        "python": platform.python_version()},
           "machine": {"cpus": os.cpu_count(), "kernel": platform.release()}}
    out = HERE / "results"
    (out / f"{args.name}.json").write_text(json.dumps(rep, indent=1))
    md = [f"# Kafka produce and consume ({n:,} records of 100 bytes, {parts} partition(s))",
          "", f"Command: `{cmd}` (at {stamp}; broker: Tansu, memory storage, on the same "
          f"machine: {os.cpu_count()} cores). Medians of {args.rounds} rounds, interleaved; "
          "records counted from the broker (produce) or the tool's own output (consume).", ""]
    for phase in ("produce", "consume"):
        md += [f"## {phase.capitalize()}", "",
               "| Tool | records/s (median) | min–max s | records | peak MB | cores used |",
               "|---|---:|---:|---:|---:|---:|"]
        for name, runs in results[phase].items():
            ok = [x for x in runs if x["rc"] == 0]
            if not ok:
                md.append(f"| {name} | failed | | | | |")
                continue
            walls = [x["wall"] for x in ok]
            med = statistics.median(walls)
            recs = statistics.median([x["records"] for x in ok])
            md.append(f"| {name} | {rate(recs, med):,.0f} | {min(walls):.2f}–{max(walls):.2f} "
                      f"| {recs:,.0f} | {statistics.median([x['peak_mb'] for x in ok]):.0f} | "
                      f"{statistics.median([x['cpu'] / x['wall'] for x in ok]):.2f} |")
        md.append("")
    md += [f"The consume topic holds {present:,} records (read to its end by confluent-kafka). "
           "Ferry's BATCH read ends at the end offsets the broker names when the job starts "
           "(ListOffsets); Tansu 0.x answers with the last record batch's base offset + 1, so "
           "Ferry's runs read all but the last producer batch's records. Its rates are of the "
           "records it read.", ""]
    if not kcat_reason:
        md += ["kcat runs with librdkafka's defaults (its consumer's fetch.queue.backoff.ms is "
               "1000 ms), except in the row that names another value; its consume rows pipe "
               "every value, one line each, into `wc -l`.", ""]
    if kcat_reason:
        md += [f"kcat is not in the table: {kcat_reason}. Debian's kcat 1.7 (librdkafka "
               "2.0) cannot talk to Tansu; librdkafka 2.12 (Ferry's vendored one, which "
               "bench/setup_kcat.sh builds kcat with) and 2.16 (confluent-kafka's) can.", ""]
    md += ["Versions: " + ", ".join(f"{k} {v}" for k, v in rep["versions"].items()) + ".", ""]
    (out / f"{args.name}.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
