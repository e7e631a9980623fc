#!/usr/bin/env python3
"""Latency of `ferry serve`'s /metrics while 20 jobs run.

Starts `ferry serve` on a free loopback port with a fresh checkpoint directory, submits
JOBS streaming jobs through the REST API (FakeSource, one row per split, into a
transactional LocalFile sink, checkpoints every 300 ms), waits until all run, then times
ROUNDS sequential `GET /metrics` (each a new connection, the body read to the end) and
writes the percentiles to bench/results/serve-metrics.md (with this command, the binary,
the machine and its load). Standard library only.

    python3 bench/serve_metrics.py [--jobs 20] [--rounds 500] [--bin PATH] [--out FILE]

The binary defaults to $FERRY_BIN, else $CARGO_TARGET_DIR/debug/ferry
(~/.cache/ferry/target/debug/ferry).
"""
import argparse, json, os, platform, shutil, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def call(addr, path, body=None):
    req = urllib.request.Request(f"http://{addr}{path}", data=body, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.read()

JOB = """env {{ job.mode = "STREAMING", checkpoint.interval = 1000 }}
source {{ FakeSource {{ plugin_output = "fake", row.num = 200000, split.num = 2000, split.read-interval = 50,
  schema = {{ fields {{ id = bigint, name = string, price = double }} }} }} }}
sink {{ LocalFile {{ path = "{out}", file_format_type = "csv", is_enable_transaction = true }} }}
"""

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--bin", default=os.environ.get("FERRY_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/ferry/target")), "debug", "ferry"))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "results", "serve-metrics.md"))
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ferry-serve-bench-")
    addr = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen([a.bin, "serve", "--listen", addr, "--checkpoint-dir", os.path.join(root, "ckpt")],
                              stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            try:
                call(addr, "/overview"); break
            except OSError:
                time.sleep(0.05)
        for i in range(a.jobs):
            st, body = call(addr, f"/submit-job?jobId=bench{i}", JOB.format(out=os.path.join(root, f"out{i}")).encode())
            assert st == 200, body
        deadline = time.time() + 60
        while time.time() < deadline:
            running = json.loads(call(addr, "/running-jobs")[1])
            if len([j for j in running if j["jobStatus"] == "RUNNING"]) == a.jobs:
                break
            time.sleep(0.2)
        time.sleep(3)  # rows flowing, checkpoints completing, rates sampled
        lat, size = [], 0
        for _ in range(a.rounds):
            t = time.perf_counter()
            st, body = call(addr, "/metrics")
            lat.append((time.perf_counter() - t) * 1000)
            assert st == 200
            size = len(body)
        running = json.loads(call(addr, "/running-jobs")[1])
        rows = sum(int(j["metrics"]["SourceReceivedCount"]) for j in running)
        for i in range(a.jobs):
            call(addr, "/stop-job", json.dumps({"jobId": f"bench{i}", "isStopWithSavePoint": False}).encode())
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * len(lat)))]
    load = os.getloadavg()
    profile = "release" if "/release/" in a.bin else "dev (debug assertions, opt-level of the dev profile)"
    cmd = "python3 bench/serve_metrics.py " + " ".join(sys.argv[1:])
    text = f"""# `/metrics` latency of `ferry serve` with {a.jobs} running jobs

Command: `{cmd.strip()}` (binary `{a.bin}`, {profile} build), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.

{a.jobs} streaming jobs (FakeSource → transactional LocalFile CSV, checkpoints every 1 s,
100 rows per split, a split every 50 ms: 2000 rows/s per job) ran in one `ferry serve` while {a.rounds} sequential
`GET /metrics` were timed, each on a new connection with the body read to the end
({size} bytes of exposition, {rows} rows read by the jobs when it ended).

| p50 | p90 | p99 | max | mean |
|---|---|---|---|---|
| {pct(50):.2f} ms | {pct(90):.2f} ms | {pct(99):.2f} ms | {lat[-1]:.2f} ms | {statistics.mean(lat):.2f} ms |

Target: under 50 ms. Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()};
load average before the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}.
"""
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(text)

if __name__ == "__main__":
    main()
