#!/usr/bin/env python3
"""CDC benchmark (issue 15): Postgres-CDC's and MySQL-CDC's snapshots against the Jdbc
source's bulk read of the same table, and Postgres-CDC's streaming rate and latency against
pg_recvlogical on the same kind of slot. Writes bench/results/<name>.md and .json.

Needs the local PostgreSQL with wal_level = logical and MariaDB with its ROW binlog
(scripts/setup-databases), the mariadb client, psql and
pg_recvlogical (Debian's postgresql-client), and a Ferry binary: $FERRY_BIN, or the release
build in $CARGO_TARGET_DIR (default ~/.cache/ferry/target-release), which
`cargo build --release -p ferry-cli` makes.

  bench/cdc.py --rows 1000000 --changes 200000 --load 5000 --seconds 20 --rounds 3

What is measured, each a fresh process timed from its start:
  snapshot   Jdbc (`table_path`, parallelism 2) -> Blackhole, BATCH, to the process's exit;
             Postgres-CDC (`startup.mode = initial`, parallelism 2: two snapshot readers)
             -> Blackhole, to the log line saying the snapshot is complete (the job then
             streams; it is stopped). The same for the same rows in MariaDB (copied once
             by bench/harness.py's workload-8 loader): Jdbc against MySQL-CDC.
  streaming  `changes` inserts (transactions of 1000 rows) made while the job is stopped,
             then the job resumed: time until the Jdbc target (upserts by key) holds them
             all; pg_recvlogical reads the same changes from a pgoutput slot to /dev/null
             (`--endpos` at the server's position after the inserts) as the physical
             reference.
  latency    a steady load of `load` inserts/s (a transaction every 100 ms) for `seconds`
             while the job runs: each row's `created` (clock_timestamp() at the insert)
             against `arrived` (the target's default clock_timestamp() when the sink
             writes it): p50, p99, max.
"""
import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402  (the MariaDB copy of workload 8's table)
CONN = ["-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-XAtq", "-v", "ON_ERROR_STOP=1"]


def psql(sql: str) -> str:
    out = subprocess.run(["psql", *CONN, "-c", sql], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"psql failed: {out.stderr}\n{sql}")
    return out.stdout.strip()


def ferry_bin() -> str:
    if os.environ.get("FERRY_BIN"):
        return os.environ["FERRY_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache/ferry/target-release"))
    b = Path(target) / "release" / "ferry"
    if not b.exists():
        sys.exit(f"no Ferry binary at {b}: build it (cargo build --release -p ferry-cli) or set FERRY_BIN")
    return str(b)


def drop_slot(slot: str) -> None:
    # The slot of a stopped job is released a moment after its process ends.
    for _ in range(100):
        if psql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}' AND active") == "0":
            break
        time.sleep(0.1)
    psql(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'")
    psql(f"DROP PUBLICATION IF EXISTS {slot}_publication")


def write_job(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(text)
    return p


def cdc_job(table: str, slot: str, sink: str, parallelism: int = 1) -> str:
    return f"""
env {{ job.name = "bench-cdc", job.mode = "STREAMING", checkpoint.interval = 1000, parallelism = {parallelism} }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    table-names = ["test.{table}"]
    slot.name = "{slot}"
  }}
}}
sink {{
{sink}
}}
"""


JDBC_TARGET = """  Jdbc {
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    generate_sink_sql = true
    database = test
    table = "ferry_bench.cdc_dst"
    primary_keys = ["id"]
  }"""


def start_ferry(job: Path, job_id: str, ckpt: Path, log_level: str = "warn") -> subprocess.Popen:
    env = dict(os.environ, RUST_LOG=log_level)
    return subprocess.Popen(
        [ferry_bin(), "run", str(job), "--job-id", job_id, "--checkpoint-dir", str(ckpt)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def stop_ferry(p: subprocess.Popen) -> str:
    """Asks for a savepoint (SIGTERM) and waits; returns stderr."""
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    return err or ""


def timed_snapshot(job: Path, job_id: str, ckpt: Path, log_level: str, what: str) -> float:
    """Runs a CDC job until it logs that its snapshot is complete; kills it; the seconds."""
    t0 = time.monotonic()
    p = start_ferry(job, job_id, ckpt, log_level)
    done = None
    lines = []
    for line in p.stderr:
        lines.append(line)
        if "snapshot of" in line and "complete" in line:
            done = time.monotonic() - t0
            break
    p.send_signal(signal.SIGKILL)
    p.wait()
    if done is None:
        sys.exit(f"the {what} job ended before its snapshot was complete:\n" + "".join(lines[-20:]))
    return done


def mysql_round(d: Path, rnd: int) -> dict:
    """MySQL-CDC's snapshot and the Jdbc source's bulk read of the same table in MariaDB."""
    out = {}
    job = write_job(d, "jdbc-my.conf", """
env { job.name = "bench-jdbc-mariadb", job.mode = "BATCH", parallelism = 2 }
source { Jdbc { url = "jdbc:mysql://127.0.0.1:3306/ferry_bench", driver = "com.mysql.cj.jdbc.Driver",
  user = "root", password = "", table_path = "ferry_bench.cdc_snap" } }
sink { Blackhole {} }
""")
    t0 = time.monotonic()
    r = subprocess.run([ferry_bin(), "run", str(job)], capture_output=True, text=True)
    out["my_jdbc_s"] = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"the Jdbc (MariaDB) job failed: {r.stderr}")
    job = write_job(d, "snap-my.conf", """
env { job.name = "bench-mysql-cdc", job.mode = "STREAMING", checkpoint.interval = 1000, parallelism = 2 }
source {
  MySQL-CDC {
    base-url = "jdbc:mysql://127.0.0.1:3306/ferry_bench"
    username = "root"
    password = ""
    table-names = ["ferry_bench.cdc_snap"]
    server-id = 6391
  }
}
sink { Blackhole {} }
""")
    out["my_cdc_s"] = timed_snapshot(job, "snap-my", d / f"ckpt-snap-my-{rnd}",
                                     "warn,ferry_connector_mysql_cdc=info", "MySQL-CDC")
    return out


def snapshot_round(rows: int, d: Path, rnd: int) -> dict:
    out = {}
    job = write_job(d, "jdbc.conf", f"""
env {{ job.name = "bench-jdbc", job.mode = "BATCH", parallelism = 2 }}
source {{ Jdbc {{ url = "jdbc:postgresql://127.0.0.1:5432/test", driver = "org.postgresql.Driver",
  user = "postgres", table_path = "test.ferry_bench.cdc_snap" }} }}
sink {{ Blackhole {{}} }}
""")
    t0 = time.monotonic()
    r = subprocess.run([ferry_bin(), "run", str(job)], capture_output=True, text=True)
    out["jdbc_s"] = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"the Jdbc job failed: {r.stderr}")
    drop_slot("ferry_bench_snap")
    job = write_job(d, "snap.conf", cdc_job("ferry_bench.cdc_snap", "ferry_bench_snap", "  Blackhole {}", 2))
    out["cdc_s"] = timed_snapshot(job, "snap", d / f"ckpt-snap-{rnd}",
                                  "warn,ferry_connector_postgres_cdc=info", "Postgres-CDC")
    drop_slot("ferry_bench_snap")
    out.update(mysql_round(d, rnd))
    return out


def jobs_text(ckpt: Path) -> str:
    """`ferry jobs` of `ckpt`: a running job's figures (its phase) are under its line."""
    return subprocess.run([ferry_bin(), "jobs", "--checkpoint-dir", str(ckpt)],
                          capture_output=True, text=True).stdout


def count_dst() -> int:
    return int(psql("SELECT count(*) FROM ferry_bench.cdc_dst"))


def streaming_round(changes: int, d: Path, rnd: int) -> dict:
    drop_slot("ferry_bench_stream")
    drop_slot("ferry_bench_ref")
    psql("""DROP TABLE IF EXISTS ferry_bench.cdc_src, ferry_bench.cdc_dst;
            CREATE TABLE ferry_bench.cdc_src (id int8 PRIMARY KEY, v int4 NOT NULL,
              created timestamptz NOT NULL DEFAULT clock_timestamp(), note text);
            CREATE TABLE ferry_bench.cdc_dst (id int8 PRIMARY KEY, v int4 NOT NULL,
              created timestamptz NOT NULL, note text,
              arrived timestamptz NOT NULL DEFAULT clock_timestamp());""")
    job = write_job(d, "stream.conf", cdc_job("ferry_bench.cdc_src", "ferry_bench_stream", JDBC_TARGET))
    ckpt = d / f"ckpt-stream-{rnd}"
    # First run: creates the slot and publication, reads the (empty) snapshot; stopped.
    p = start_ferry(job, "stream", ckpt)
    deadline = time.monotonic() + 60
    while "phase streaming" not in jobs_text(ckpt):
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            sys.exit("the first streaming run never streamed:\n" + p.communicate()[1])
        time.sleep(0.2)
    err = stop_ferry(p)
    if p.returncode != 0:
        sys.exit("the first streaming run failed:\n" + err)
    # The reference slot, at the same point.
    psql("CREATE PUBLICATION ferry_bench_ref_publication FOR TABLE ferry_bench.cdc_src")
    psql("SELECT pg_create_logical_replication_slot('ferry_bench_ref', 'pgoutput')")
    script = "".join(
        f"INSERT INTO ferry_bench.cdc_src (id, v, note) SELECT g, g % 1000, 'note ' || g "
        f"FROM generate_series({a}, {min(a + 999, changes)}) g;\n"
        for a in range(1, changes + 1, 1000))
    subprocess.run(["psql", *CONN], input=script, text=True, check=True, capture_output=True)
    endpos = psql("SELECT pg_current_wal_lsn()")
    out = {}
    t0 = time.monotonic()
    r = subprocess.run(["pg_recvlogical", "-d", "host=127.0.0.1 user=postgres dbname=test",
                        "--slot", "ferry_bench_ref", "--start", "-o", "proto_version=1",
                        "-o", "publication_names=ferry_bench_ref_publication",
                        "--endpos", endpos, "-f", "/dev/null", "--no-loop"],
                       capture_output=True, text=True)
    out["recvlogical_s"] = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"pg_recvlogical failed: {r.stderr}")
    drop_slot("ferry_bench_ref")
    t0 = time.monotonic()
    p = start_ferry(job, "stream", ckpt)
    while count_dst() < changes:
        if p.poll() is not None:
            sys.exit("the resumed streaming run ended:\n" + p.stderr.read())
        time.sleep(0.05)
    out["ferry_s"] = time.monotonic() - t0
    out["process"] = p
    return out


def latency(p: subprocess.Popen, start_id: int, load: int, seconds: float) -> dict:
    """A steady load into the running job; returns the latencies' percentiles."""
    per_tx = max(1, load // 10)
    feeder = subprocess.Popen(["psql", *CONN], stdin=subprocess.PIPE, text=True,
                              stdout=subprocess.DEVNULL)
    nid = start_id
    t0 = time.monotonic()
    tick = 0
    while time.monotonic() - t0 < seconds:
        feeder.stdin.write(
            f"INSERT INTO ferry_bench.cdc_src (id, v, note) SELECT g, 1, 'load' "
            f"FROM generate_series({nid}, {nid + per_tx - 1}) g;\n")
        feeder.stdin.flush()
        nid += per_tx
        tick += 1
        sleep = t0 + tick * 0.1 - time.monotonic()
        if sleep > 0:
            time.sleep(sleep)
    feeder.stdin.close()
    feeder.wait()
    offered = (nid - start_id) / (time.monotonic() - t0)
    deadline = time.monotonic() + 120
    while int(psql(f"SELECT count(*) FROM ferry_bench.cdc_dst WHERE id >= {start_id}")) < nid - start_id:
        if time.monotonic() > deadline or p.poll() is not None:
            sys.exit("the load never arrived in full")
        time.sleep(0.1)
    q = psql(f"""SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY e), percentile_cont(0.99)
                 WITHIN GROUP (ORDER BY e), max(e) FROM (SELECT extract(epoch FROM arrived - created) e
                 FROM ferry_bench.cdc_dst WHERE id >= {start_id}) x""").split("|")
    return {"offered_per_s": offered, "p50_s": float(q[0]), "p99_s": float(q[1]), "max_s": float(q[2])}


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the snapshot table")
    ap.add_argument("--changes", type=int, default=200_000, help="changes streamed per round")
    ap.add_argument("--load", type=int, default=5000, help="inserts/s of the latency run")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default="cdc")
    a = ap.parse_args()
    binary = ferry_bin()
    print(f"== snapshot table: {a.rows} rows, 16 columns (bench/sql/jdbc_source.sql)", flush=True)
    subprocess.run(["psql", *CONN, "-v", f"rows={a.rows}", "-v", "tbl=cdc_snap",
                    "-f", str(HERE / "sql/jdbc_source.sql")], check=True, capture_output=True)
    harness.ensure_mariadb_table("ferry_bench.cdc_snap", a.rows)
    snaps, streams, lats = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for rnd in range(a.rounds):
            s = snapshot_round(a.rows, d, rnd)
            snaps.append(s)
            print(f"   round {rnd + 1}: Jdbc {a.rows / s['jdbc_s']:,.0f} rows/s, "
                  f"Postgres-CDC snapshot {a.rows / s['cdc_s']:,.0f} rows/s; MariaDB: Jdbc "
                  f"{a.rows / s['my_jdbc_s']:,.0f} rows/s, MySQL-CDC snapshot "
                  f"{a.rows / s['my_cdc_s']:,.0f} rows/s", flush=True)
        for rnd in range(a.rounds):
            s = streaming_round(a.changes, d, rnd)
            p = s.pop("process")
            lat = latency(p, 10_000_000, a.load, a.seconds)
            err = stop_ferry(p)
            if p.returncode != 0:
                sys.exit("the streaming run failed:\n" + err)
            drop_slot("ferry_bench_stream")
            streams.append(s)
            lats.append(lat)
            print(f"   round {rnd + 1}: Ferry {a.changes / s['ferry_s']:,.0f} changes/s into PostgreSQL, "
                  f"pg_recvlogical {a.changes / s['recvlogical_s']:,.0f}/s to /dev/null; at "
                  f"{lat['offered_per_s']:,.0f}/s p50 {lat['p50_s'] * 1000:.0f} ms, "
                  f"p99 {lat['p99_s'] * 1000:.0f} ms", flush=True)
    res = {
        "command": "bench/cdc.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "ferry": binary, "cpus": os.cpu_count(), "machine": platform.platform(),
        "args": vars(a), "snapshot": snaps, "streaming": streams, "latency": lats,
    }
    out = HERE / "results"
    (out / f"{a.name}.json").write_text(json.dumps(res, indent=1))
    rows_s = lambda k: med([a.rows / s[k] for s in snaps])
    ch_s = lambda k: med([a.changes / s[k] for s in streams])
    md = f"""# CDC benchmark (issue 15)

`{res['command']}` — {res['date']}, {res['cpus']} cores ({res['machine']}), Ferry `{binary}`,
PostgreSQL 15 and MariaDB 10.11 on the same machine. Medians of {a.rounds} rounds, each a fresh process timed
from its start (see the script's docstring for what each figure is).

| what | Ferry | reference |
|---|---|---|
| snapshot of {a.rows:,} rows × 16 columns → Blackhole | Postgres-CDC {rows_s('cdc_s'):,.0f} rows/s | Jdbc source bulk read {rows_s('jdbc_s'):,.0f} rows/s |
| the same rows in MariaDB 10.11 → Blackhole | MySQL-CDC {rows_s('my_cdc_s'):,.0f} rows/s | Jdbc source bulk read {rows_s('my_jdbc_s'):,.0f} rows/s |
| {a.changes:,} inserts streamed (resumed job) | Postgres-CDC → Jdbc upserts (PostgreSQL) {ch_s('ferry_s'):,.0f} changes/s | pg_recvlogical (pgoutput) → /dev/null {ch_s('recvlogical_s'):,.0f} changes/s |
| latency at {med([l['offered_per_s'] for l in lats]):,.0f} inserts/s, commit → row in the target | p50 {med([l['p50_s'] for l in lats]) * 1000:.0f} ms, p99 {med([l['p99_s'] for l in lats]) * 1000:.0f} ms, max {max(l['max_s'] for l in lats) * 1000:.0f} ms | target: p99 under 1 s at 5k/s |

Targets (issue 15, 2 cores): at least 20k changes/s into PostgreSQL, p99 under 1 s at 5k
changes/s, a snapshot no slower than the Jdbc bulk read. The streaming time includes the
process's start and its connections (about 0.1–0.3 s), so short rounds understate the rate.
Every round: `{a.name}.json`.
"""
    (out / f"{a.name}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
