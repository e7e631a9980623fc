#!/usr/bin/env python3
"""Checkpoint cost, restart latency and memory of Ferry's embedded engine (issue 3).

Usage: bench/streaming_checkpoints.py [--ferry PATH] [--rows N] [--minutes M]

1. FakeSource -> Blackhole, BATCH, with `checkpoint.interval = 1000` against none:
   throughput kept with checkpoints (target >= 95%).
2. A directory of CSV files -> transactional Parquet, BATCH with checkpoints every 1 s
   against none but the final one (the throughput kept, target >= 95%, --rounds
   interleaved), and the same job in STREAMING mode: seconds until every row is committed
   (discovery and the 1 s commit period included).
3. kill -9 of the streaming job while files keep arriving, restart with the same job id:
   seconds until the restarted job publishes new output (target < 2 s).
4. Resident memory of the streaming job sampled every second for --minutes (flat?).
Writes bench/results/streaming.md (--out to name another file).
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(ferry, job, *args, timeout=600):
    t = time.perf_counter()
    p = subprocess.run([ferry, "run", str(job), *args], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"ferry failed: {p.stderr}")
    return time.perf_counter() - t


def fake_job(d, rows, interval):
    env = f"checkpoint.interval = {interval}" if interval else ""
    p = d / f"fake_{interval}.conf"
    p.write_text(f"""
env {{
  job.mode = "BATCH"
  parallelism = 2
  {env}
}}
source {{ FakeSource {{ plugin_output = "f", row.num = {rows // 2}, split.num = 8,
  schema = {{ fields {{ id = bigint, user_id = int, amount = double, note = string }} }} }} }}
sink {{ Blackhole {{}} }}
""")
    return p


def file_job(d, src, out, mode, interval=1000):
    p = d / f"file_{mode}_{interval}.conf"
    ck = f", checkpoint.interval = {interval}" if interval else ""
    p.write_text(f"""
env {{ job.mode = "{mode}", parallelism = 2{ck} }}
source {{ LocalFile {{ plugin_output = "e", path = "{src}", file_format_type = "csv",
  schema = {{ fields {{ id = bigint, user_id = int, amount = double, note = string }} }} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "parquet", compress_codec = "snappy" }} }}
""")
    return p


def write_files(src, files, rows_per_file, start=0):
    src.mkdir(parents=True, exist_ok=True)
    for f in range(start, start + files):
        tmp = src / f".f{f:04}.csv"
        with open(tmp, "w") as out:
            base = f * rows_per_file
            out.write("".join(f"{i},{i % 9973},{(i % 1000) / 7:.3f},note-{i % 97}\n" for i in range(base, base + rows_per_file)))
        tmp.rename(src / f"f{f:04}.csv")


def committed_files(out):
    return [p for p in out.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in p.relative_to(out).parts)]


def parquet_rows(out):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    return sum(pq.ParquetFile(p).metadata.num_rows for p in committed_files(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", default=os.environ.get("FERRY", "/work/target-release/release/ferry"))
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows-per-file", type=int, default=500_000)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="streaming.md", help="file under bench/results/ to write")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    lines = ["# Streaming and checkpoints (issue 3)", "", f"Command: `{' '.join(sys.argv)}`", "",
             f"Machine: {os.cpu_count()} cores, " + open("/proc/meminfo").readline().split(":")[1].strip() + " memory; "
             f"load average at start {os.getloadavg()[0]:.2f}.", ""]

    # 1. checkpoint cost on generation -> blackhole
    with_ck, without = [], []
    for _ in range(a.rounds):
        without.append(a.rows / run(a.ferry, fake_job(tmp, a.rows, 0)))
        with_ck.append(a.rows / run(a.ferry, fake_job(tmp, a.rows, 1000)))
    m0, m1 = statistics.median(without), statistics.median(with_ck)
    lines += ["## FakeSource -> Blackhole, checkpoints every 1 s vs none", "",
              "| run | median rows/s | spread |", "|---|---|---|",
              f"| no checkpoint | {m0:,.0f} | {min(without):,.0f}-{max(without):,.0f} |",
              f"| checkpoint every 1 s | {m1:,.0f} | {min(with_ck):,.0f}-{max(with_ck):,.0f} |", "",
              f"Kept: **{100 * m1 / m0:.1f}%** of the throughput (target >= 95%).", ""]

    # 2. file -> file: streaming with 1 s checkpoints vs the same job in batch
    src = tmp / "in"
    write_files(src, a.files, a.rows_per_file)
    total = a.files * a.rows_per_file
    # BATCH with and without periodic checkpoints, interleaved; fresh output each run.
    b_off, b_on = [], []
    for r in range(a.rounds):
        for interval, into in ((0, b_off), (1000, b_on)):
            out_b = tmp / f"out_batch_{interval}_{r}"
            into.append(run(a.ferry, file_job(tmp, src, out_b, "BATCH", interval)))
            rows_b = parquet_rows(out_b)
            if rows_b is not None and rows_b != total:
                sys.exit(f"BATCH run wrote {rows_b} rows, expected {total}")
            shutil.rmtree(out_b, ignore_errors=True)
    t_off, t_on = statistics.median(b_off), statistics.median(b_on)
    out_s = tmp / "out_stream"
    job = file_job(tmp, src, out_s, "STREAMING")
    ck = tmp / "ck"
    t0 = time.perf_counter()
    proc = subprocess.Popen([a.ferry, "run", str(job), "--job-id", "s", "--checkpoint-dir", str(ck)], stderr=subprocess.PIPE, text=True)
    while (parquet_rows(out_s) or 0) < total and time.perf_counter() - t0 < 600:
        time.sleep(0.2)
    t_stream = time.perf_counter() - t0
    lines += ["## CSV files -> transactional Parquet", "",
              f"{a.files} files x {a.rows_per_file:,} rows; BATCH medians of {a.rounds} interleaved runs.", "",
              "| run | seconds until all rows committed | rows/s | spread s |", "|---|---|---|---|",
              f"| BATCH, no checkpoint but the final one | {t_off:.2f} | {total / t_off:,.0f} | {min(b_off):.2f}-{max(b_off):.2f} |",
              f"| BATCH, checkpoint every 1 s | {t_on:.2f} | {total / t_on:,.0f} | {min(b_on):.2f}-{max(b_on):.2f} |",
              f"| STREAMING, checkpoint every 1 s (one run) | {t_stream:.2f} | {total / t_stream:,.0f} | |", "",
              f"Kept with checkpoints every 1 s: **{100 * t_off / t_on:.1f}%** of the throughput (target >= 95%).", ""]

    # 3. kill -9 and restart latency, 4. memory while files keep arriving
    samples, next_file = [], a.files
    end = time.perf_counter() + a.minutes * 60
    while time.perf_counter() < end:
        write_files(src, 1, a.rows_per_file // 10, start=next_file)
        next_file += 1
        samples.append(rss_kb(proc.pid))
        time.sleep(1)
    before = len(committed_files(out_s))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    write_files(src, 2, a.rows_per_file // 10, start=next_file)
    t0 = time.perf_counter()
    proc = subprocess.Popen([a.ferry, "run", str(job), "--job-id", "s", "--checkpoint-dir", str(ck)], stderr=subprocess.PIPE, text=True)
    while len(committed_files(out_s)) <= before and time.perf_counter() - t0 < 60:
        time.sleep(0.05)
    restart = time.perf_counter() - t0
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    lines += ["## Restart after kill -9", "",
              f"New committed output **{restart:.2f} s** after the restart (target < 2 s; checkpoint interval 1 s).", "",
              "## Memory while files keep arriving", "",
              f"{len(samples)} samples, one a second: first {samples[0] / 1024 if samples else 0:.0f} MiB, "
              f"median {statistics.median(samples) / 1024 if samples else 0:.0f} MiB, max {max(samples) / 1024 if samples else 0:.0f} MiB, "
              f"last {samples[-1] / 1024 if samples else 0:.0f} MiB.", ""]
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / a.out).write_text("\n".join(lines))
    print("\n".join(lines))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
