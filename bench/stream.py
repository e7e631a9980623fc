"""The streaming workload (issue 6's workload 3): CSV files arriving in a directory are
streamed to Parquet with a checkpoint every second; rows/s and file → committed latency.

Used by harness.py (`bench/run --only 5`). One run of one tool:

1. The input directory holds every file of the run under a hidden name (`.burst-00.csv`:
   a hard link to the generated file, so staging costs nothing and writes nothing); every
   tool ignores names starting with `.`. The tool starts, watching that directory.
2. **Warm-up**: `warmup.csv` (1,000 rows) is renamed into view; when its rows are committed
   the tool is ready (start-up, first listing and first commit are behind it).
3. **Burst** (throughput): the burst files (20 × 500k rows) are renamed into view as fast
   as possible (microseconds apart); rows/s = their rows / (last of their rows committed −
   first rename).
4. **Paced** (latency): the paced files (5 × 500k rows) are renamed one every `pace`
   seconds plus 1/5 of the checkpoint interval (4.0, 8.2, 12.4 … s), so that a tool that
   keeps up has one file in flight at a time and the files arrive at every phase of the
   checkpoint cycle.
5. The tool is stopped (SIGTERM: Ferry's savepoint, the peers' graceful stop) and its
   committed output is checked (count and the sums of every column).

Committed means visible to a reader that honours the tool's commit protocol: Ferry's
transactional LocalFile sink publishes files by rename at each checkpoint (staging lives
under `_ferry_tmp/`); Spark's file sink lists a batch's files in `_spark_metadata/`
(files in the directory but not in that log are not committed); Flink's filesystem sink
renames hidden in-progress part files into place on a checkpoint. The harness polls the
output every 50 ms, reads the `id` column of each newly committed file and attributes its
rows to input files (ids are contiguous per input file), so "file k committed" = every row
of file k is in committed output; latency = that moment − the rename of file k.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

WARMUP_ROWS = 1000
CHECKPOINT_S = 1.0  # every tool's checkpoint / trigger interval
POLL_S = 0.05
CSV_NAMES = ["id", "user_id", "event_type", "amount", "ts", "note"]


# ---------------------------------------------------------------------------------- data

@dataclass
class StreamData:
    """The generated files of one size: burst, paced and warm-up, and their checksum."""
    dir: Path
    files: int
    rows: int
    paced: int
    expected: list = field(default_factory=list)

    @property
    def burst_names(self):
        return [f"burst-{k:02}.csv" for k in range(self.files)]

    @property
    def paced_names(self):
        return [f"paced-{k:02}.csv" for k in range(self.paced)]

    @property
    def inputs(self) -> list:
        """Every input file in id order; index = id // rows (warm-up last, fewer rows)."""
        return self.burst_names + self.paced_names + ["warmup.csv"]

    def rows_of(self, i: int) -> int:
        return WARMUP_ROWS if i == len(self.inputs) - 1 else self.rows


def prepare(data_dir: Path, files: int, rows: int, paced: int, checksum_csv) -> StreamData:
    """Generates the files once (ids [k·rows, (k+1)·rows) for input k, each with a header
    line, values from gen_data.py) and their expected checksum (every row: no filter)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_data
    import pyarrow as pa
    import pyarrow.csv as pcsv

    d = data_dir / f"stream_{files}x{rows}_{paced}"
    s = StreamData(d, files, rows, paced)
    meta = d / "expected.json"
    if meta.exists():
        s.expected = json.loads(meta.read_text())["expected"]
        return s
    d.mkdir(parents=True, exist_ok=True)
    opts = pcsv.WriteOptions(include_header=False, quoting_style="none")
    for i, name in enumerate(s.inputs):
        start = i * rows
        stop = start + s.rows_of(i)
        with pa.OSFile(str(d / name), "wb") as out:
            out.write(b"id,user_id,event_type,amount,ts,note\n")
            for a in range(start, stop, gen_data.CHUNK):
                pcsv.write_csv(gen_data.chunk_table(a, min(stop, a + gen_data.CHUNK)), out, opts)
    s.expected = checksum_csv([str(d / n) for n in s.inputs])
    meta.write_text(json.dumps({"expected": s.expected}))
    return s


# ----------------------------------------------------------------------- committed output

def committed_files(out: Path, protocol: str) -> list:
    """Data files a reader may see now. protocol: "dir" (every file not hidden: Ferry's
    transactional sink, Flink's part files) or "spark" (the files `_spark_metadata` lists)."""
    if protocol == "spark":
        log = out / "_spark_metadata"
        files = set()
        try:
            names = os.listdir(log)
        except OSError:
            return []
        for n in names:
            if n.startswith("."):
                continue  # Spark writes each log file under a hidden temporary name first
            try:
                lines = (log / n).read_text().splitlines()
            except OSError:
                continue
            for line in lines[1:]:  # the first line is the log version ("v1")
                if line.strip():
                    e = json.loads(line)
                    if e.get("action", "add") == "add":
                        p = e["path"]
                        files.add(p[len("file://"):] if p.startswith("file://") else p)
        return sorted(files)
    found = []
    for root, dirs, names in os.walk(out):
        dirs[:] = [x for x in dirs if not x.startswith((".", "_"))]
        found += [os.path.join(root, n) for n in names if not n.startswith((".", "_"))]
    return sorted(found)


def read_ids(path: str, fmt: str):
    import numpy as np
    if fmt == "parquet":
        import pyarrow.parquet as pq
        col = pq.read_table(path, columns=["id"]).column(0)
    else:  # Flink's CSV: no header line
        import pyarrow as pa
        import pyarrow.csv as pcsv
        col = pcsv.read_csv(path, read_options=pcsv.ReadOptions(column_names=CSV_NAMES),
                            convert_options=pcsv.ConvertOptions(include_columns=["id"],
                                                                column_types={"id": pa.int64()})).column(0)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


class Tracker:
    """Polls the committed output; per input file: when its first rows and all its rows
    became visible."""

    def __init__(self, out: Path, protocol: str, fmt: str, data: StreamData):
        import numpy as np
        self.out, self.protocol, self.fmt, self.data = out, protocol, fmt, data
        n = len(data.inputs)
        self.want = np.array([data.rows_of(i) for i in range(n)], dtype=np.int64)
        self.counts = np.zeros(n, dtype=np.int64)
        self.first = [None] * n
        self.done = [None] * n
        self.seen = set()
        self.stray = 0  # rows whose id belongs to no input file (never expected)

    def poll(self) -> None:
        import numpy as np
        now = time.perf_counter()  # before listing: the files seen were committed by then
        for f in committed_files(self.out, self.protocol):
            if f in self.seen:
                continue
            try:
                ids = read_ids(f, self.fmt)
            except (OSError, ValueError) as e:  # e.g. a file listed by a log but gone
                sys.stderr.write(f"stream: cannot read {f}: {e}\n")
                continue
            self.seen.add(f)
            idx = ids // self.data.rows
            ok = (idx >= 0) & (idx < len(self.counts))
            self.stray += int((~ok).sum())
            add = np.bincount(idx[ok], minlength=len(self.counts))
            self.counts += add
            for i in np.nonzero(add)[0]:
                if self.first[i] is None:
                    self.first[i] = now
        for i in range(len(self.counts)):
            if self.done[i] is None and self.counts[i] >= self.want[i]:
                self.done[i] = now


# ------------------------------------------------------------------------------ measuring

class TreeSampler:
    """Peak RSS and CPU time of a process tree, sampled every 50 ms (as harness.measure)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = 0
        self.cpu_seen = {}
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _run(self):
        import psutil
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.stop_ev.is_set():
            total = 0
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = []
            for q in procs:
                try:
                    total += q.memory_info().rss
                    ct = q.cpu_times()
                    self.cpu_seen[(q.pid, q.create_time())] = ct.user + ct.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.stop_ev.wait(0.05)

    def cpu(self) -> float:
        return sum(self.cpu_seen.values())

    def stop(self):
        self.stop_ev.set()
        self.th.join()


def cpu_busy_seconds() -> float:
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = parts[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class StreamTool:
    """One contender: a command with {in}, {out}, {ck} placeholders."""
    name: str
    cmd: list
    rounds: int
    protocol: str = "dir"     # how its commits become visible (committed_files)
    fmt: str = "parquet"      # what it writes: parquet | csv
    env: dict = field(default_factory=dict)
    note: str = ""
    runs: list = field(default_factory=list)


def run_once(t: StreamTool, data: StreamData, work: Path, env: dict, pace: float, timeout: float,
             checksum) -> dict:
    """One run of one tool (see the module doc); returns its figures."""
    root = work / "stream"
    shutil.rmtree(root, ignore_errors=True)
    src, out, ck = root / "in", root / "out", root / "ck"
    for d in (src, out, ck):
        d.mkdir(parents=True)
    for name in data.inputs:
        os.link(data.dir / name, src / ("." + name))
    cmd = [str(c).replace("{in}", str(src)).replace("{out}", str(out)).replace("{ck}", str(ck)) for c in t.cmd]
    tr = Tracker(out, t.protocol, t.fmt, data)
    n_burst, n_paced = data.files, data.paced
    warm = len(data.inputs) - 1
    renamed = [None] * len(data.inputs)

    def reveal(i):
        name = data.inputs[i]
        os.rename(src / ("." + name), src / name)
        renamed[i] = time.perf_counter()

    r = {"name": t.name, "ok": False}
    with open(root / "stdout", "wb") as so, open(root / "stderr", "wb") as se:
        t_launch = time.perf_counter()
        p = subprocess.Popen(cmd, env={**env, **t.env}, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        sampler = TreeSampler(p.pid)
        deadline = t_launch + timeout

        def wait(cond, until=None) -> bool:
            """Polls until cond() (True), the time `until` (True), the tool's exit or the
            run's deadline (False)."""
            while True:
                tr.poll()
                now = time.perf_counter()
                if cond is not None and cond():
                    return True
                if until is not None and now >= until:
                    return True
                if p.poll() is not None or now > deadline:
                    return False
                time.sleep(POLL_S)

        try:
            reveal(warm)
            if not wait(lambda: tr.done[warm] is not None):
                raise RuntimeError("no commit of the warm-up file")
            r["ready_s"] = tr.done[warm] - t_launch
            # Burst: every file at once.
            cpu0, busy0, t0 = sampler.cpu(), cpu_busy_seconds(), time.perf_counter()
            for i in range(n_burst):
                reveal(i)
            if not wait(lambda: all(tr.done[i] is not None for i in range(n_burst))):
                raise RuntimeError(f"burst not committed: {int(tr.counts[:n_burst].sum()):,} of "
                                   f"{n_burst * data.rows:,} rows")
            t1 = max(tr.done[:n_burst])
            time.sleep(0.3)  # let the sampler see the CPU time up to the last commit
            cpu1, busy1 = sampler.cpu(), cpu_busy_seconds()
            r["burst_s"] = t1 - t0
            r["burst_rows_per_s"] = n_burst * data.rows / r["burst_s"]
            r["burst_cpu_s"] = cpu1 - cpu0
            r["burst_other_cores"] = max(0.0, (busy1 - busy0 - (cpu1 - cpu0)) / (time.perf_counter() - t0))
            r["burst_latency"] = [tr.done[i] - renamed[i] for i in range(n_burst)]
            # Paced: one file every `pace` seconds, each a further 1/n of the 1 s checkpoint
            # interval later, so that the files meet every phase of the checkpoint cycle (a pace
            # that is a whole number of intervals would measure one phase only).
            tp = time.perf_counter() + 0.5
            for j in range(n_paced):
                wait(None, until=tp + j * (pace + CHECKPOINT_S / n_paced))
                reveal(n_burst + j)
            paced = range(n_burst, n_burst + n_paced)
            if not wait(lambda: all(tr.done[i] is not None for i in paced)):
                raise RuntimeError("paced files not committed")
            r["paced_latency"] = [tr.done[i] - renamed[i] for i in paced]
            r["paced_first_visible"] = [tr.first[i] - renamed[i] for i in paced]
            r["ok"] = True
        except RuntimeError as e:
            r["error"] = str(e)
        finally:
            # Stop: SIGTERM to the tool's main process (Ferry: savepoint; the peers stop their
            # query); the whole group is killed if it does not exit within a minute.
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    r["killed"] = True
            try:
                os.killpg(p.pid, signal.SIGKILL)  # what the tool left behind (JVMs)
            except OSError:
                pass
            p.wait()
            sampler.stop()
        r["rc"] = p.returncode
        r["total_s"] = time.perf_counter() - t_launch
        r["cpu_s"] = sampler.cpu()
        r["peak_mb"] = sampler.peak / 2**20
    if not r["ok"]:
        r["stderr"] = (root / "stderr").read_text(errors="replace")[-3000:]
    tr.poll()
    files = committed_files(out, t.protocol)
    r["check"] = checksum(files, "parquet" if t.fmt == "parquet" else "csv")
    r["stray_rows"] = tr.stray
    r["out_files"] = len(files)
    return r


def run_workload(tools: list, data: StreamData, work: Path, env: dict, pace: float, timeout: float,
                 checksum, verbose=True) -> None:
    """Interleaves the tools round by round (the order rotating), as harness.run_workload."""
    for rnd in range(max(t.rounds for t in tools)):
        order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
        for t in order:
            if rnd >= t.rounds:
                continue
            r = run_once(t, data, work, env, pace, timeout, checksum)
            t.runs.append(r)
            if verbose:
                if r["ok"]:
                    print(f"  [stream] round {rnd + 1} {t.name:<34} ready {r['ready_s']:5.1f} s  burst "
                          f"{r['burst_s']:6.2f} s ({r['burst_rows_per_s'] / 1e6:5.2f} M rows/s, cpu {r['burst_cpu_s']:5.1f} s, "
                          f"other {r['burst_other_cores']:.2f})  paced latency median "
                          f"{statistics.median(r['paced_latency']):5.2f} s max {max(r['paced_latency']):5.2f} s  "
                          f"{r['peak_mb']:5.0f} MB  rows {r['check'][0]:,}", flush=True)
                else:
                    print(f"  [stream] round {rnd + 1} {t.name:<34} FAILED: {r.get('error')} (rc {r['rc']})\n"
                          f"{r.get('stderr', '')[-1500:]}", flush=True)
    shutil.rmtree(work / "stream", ignore_errors=True)


def summarize(t: StreamTool, data: StreamData, check_names: list) -> dict:
    ok = [r for r in t.runs if r["ok"]]
    s = {"name": t.name, "note": t.note, "runs": len(t.runs), "failed": len(t.runs) - len(ok),
         "cmd": " ".join(str(c) for c in t.cmd), "per_run": t.runs}
    if not ok:
        s["verdict"] = "failed"
        s["error"] = t.runs[-1].get("error", "?") if t.runs else "not run"
        return s
    med = statistics.median
    rates = [r["burst_rows_per_s"] for r in ok]
    s.update({
        "burst_rows_per_s": med(rates), "burst_rows_per_s_min": min(rates), "burst_rows_per_s_max": max(rates),
        "burst_s": med(r["burst_s"] for r in ok),
        "burst_cpu_s": med(r["burst_cpu_s"] for r in ok),
        "burst_other_cores": med(r["burst_other_cores"] for r in ok),
        "burst_latency_median": med(med(r["burst_latency"]) for r in ok),
        "burst_latency_max": med(max(r["burst_latency"]) for r in ok),
        "paced_latency_median": med(med(r["paced_latency"]) for r in ok),
        "paced_latency_max": max(max(r["paced_latency"]) for r in ok),
        "paced_first_visible_median": med(med(r["paced_first_visible"]) for r in ok),
        "ready_s": med(r["ready_s"] for r in ok),
        "peak_mb": med(r["peak_mb"] for r in ok),
        "cpu_s": med(r["cpu_s"] for r in ok),
    })
    checks = [r["check"] for r in ok]
    consistent = all(c == checks[0] for c in checks)
    s["rows"] = checks[0][0]
    if consistent and checks[0] == data.expected:
        s["verdict"] = "✓ same rows"
    else:
        bad = next(c for c in checks if c != data.expected) if any(c != data.expected for c in checks) else checks[0]
        diffs = [f"{n} {a} ≠ {b}" for n, a, b in zip(check_names, bad, data.expected) if a != b]
        s["verdict"] = "✗ different rows"
        s["mismatch"] = "; ".join(diffs[:2]) or "runs differ from each other"
    return s
