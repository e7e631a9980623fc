#!/usr/bin/env python3
"""Where a Spark run's CPU time goes, by process: the JVM, the Python driver, Spark's
Python workers (pyspark.daemon / pyspark.worker), others.

    bench/.venv/bin/python bench/spark_cpu.py [--env K=V ...] -- COMMAND ...

Runs COMMAND (in its own session), samples its process tree every 50 ms with psutil and
prints the wall time, the CPU seconds of each kind of process, the largest number of
Python workers alive at once, and COMMAND's `ferry:` messages (the Ferry driver reports
when its Spark session started and how long the job took). Used for the issue 4 profile
in results/streaming-peers.md: Ferry on Spark against plain PySpark.
"""

import argparse
import os
import subprocess
import sys
import threading
import time


def kind(cmdline: list) -> str:
    text = " ".join(cmdline)
    if not cmdline:
        return "other"
    if "java" in os.path.basename(cmdline[0]):
        return "jvm"
    if "pyspark.daemon" in text or "pyspark.worker" in text or "pyspark/daemon" in text:
        return "python workers"
    if "python" in os.path.basename(cmdline[0]):
        return "python driver"
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", action="append", default=[], metavar="K=V")
    ap.add_argument("--perf", metavar="FILE", help="also sample every CPU with `perf record -a` into FILE and "
                    "print where each kind of process spent its samples, by shared object")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    import psutil

    seen = {}  # (pid, create_time) -> (kind, cpu seconds)
    workers_max = [0]
    done = threading.Event()
    perf = None
    if a.perf:
        perf = subprocess.Popen(["perf", "record", "-a", "-F", str(HZ), "-o", a.perf], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                         text=True)

    def poll():
        root = psutil.Process(p.pid)
        while not done.is_set():
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = []
            workers = 0
            for q in procs:
                try:
                    key = (q.pid, q.create_time())
                    # Not cached (spark-submit's shell exec()s the JVM), but an exiting process
                    # (empty command line) keeps the kind it had.
                    k = kind(q.cmdline())
                    if k == "other" and key in seen:
                        k = seen[key][0]
                    ct = q.cpu_times()
                    seen[key] = (k, ct.user + ct.system)
                    workers += k == "python workers"
                except psutil.Error:
                    pass
            workers_max[0] = max(workers_max[0], workers)
            done.wait(0.05)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    out = p.stdout.read()
    p.wait()
    wall = time.perf_counter() - t0
    done.set()
    th.join()
    by = {}
    kinds = {}
    for (pid, _), (k, c) in seen.items():
        by[k] = by.get(k, 0.0) + c
        kinds[pid] = k
    print(f"wall {wall:.2f} s, rc {p.returncode}, CPU {sum(by.values()):.1f} s: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(by.items(), key=lambda x: -x[1]))
          + f"; python workers alive at once: up to {workers_max[0]}")
    for line in out.splitlines():
        if line.startswith("ferry:") or "error" in line.lower():
            print("  " + line[:300])
    if perf is not None:
        perf.send_signal(2)
        perf.wait()
        print_perf(a.perf, kinds)
    sys.exit(p.returncode)


HZ = 499


def print_perf(path: str, kinds: dict) -> None:
    """CPU seconds by (kind of process, shared object), from the perf samples of the tree's
    processes (perf script: one line per sample, process id first, shared object last)."""
    r = subprocess.run(["perf", "script", "-i", path, "-F", "pid,ip,dso"], capture_output=True, text=True)
    agg = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        k = kinds.get(int(parts[0]))
        if k is None:
            continue
        dso = os.path.basename(parts[-1].strip("()")) if parts[-1].startswith("(") else "?"
        agg[(k, dso)] = agg.get((k, dso), 0) + 1
    print(f"perf ({HZ} Hz per CPU), CPU seconds by process kind and shared object:")
    for (k, dso), n in sorted(agg.items(), key=lambda x: -x[1])[:25]:
        print(f"  {n / HZ:7.1f} s  {k:<15} {dso}")


if __name__ == "__main__":
    main()
