"""Ferry's benchmark harness: Ferry and the tools users would pick instead, side by side.

Run through `bench/run` (which installs the peers and builds Ferry); see bench/README.md.
For every workload it runs each tool as a separate process, interleaved round by round
(the order rotates every round), measures wall time, CPU time and the peak memory of the
whole process tree, checks every tool's output independently with DuckDB, and writes
bench/results/<mode>.md, .json and .png.
"""

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_PY = HERE / ".venv" / "bin" / "python"
FLINK_PY = HERE / ".venv-flink" / "bin" / "python"
PEERS = HERE / "peers.py"
JOBS = HERE / "jobs"
CSV_COLUMNS = ("{'id': 'BIGINT', 'user_id': 'INTEGER', 'event_type': 'VARCHAR', "
               "'amount': 'DOUBLE', 'ts': 'VARCHAR', 'note': 'VARCHAR'}")
# The checksum every output must match: count and sums over every column, computed by
# DuckDB from the files a tool wrote (never from the tool's own report).
CHECKSUM = ("SELECT count(*), sum(id), sum(user_id), sum(round(amount * 100)::BIGINT), "
            "sum(epoch(ts::TIMESTAMPTZ)::BIGINT), sum(length(event_type)), sum(length(note)) "
            "FROM {rel}")
CHECK_NAMES = ["rows", "sum(id)", "sum(user_id)", "sum(amount·100)", "sum(epoch ts)",
               "sum(len event_type)", "sum(len note)"]


# ----------------------------------------------------------------------------- measuring

def cpu_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all processes, all cores)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = parts[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    """One measured process run."""
    wall: float
    cpu: float
    peak_mb: float
    other_cores: float
    rc: int
    stdout: str
    stderr: str


def measure(cmd, env=None, cwd=None, timeout=1800, workdir=None) -> Run:
    """Runs cmd, polling the RSS and CPU of its process tree every 20 ms for the peak."""
    out_path = Path(workdir or "/tmp") / "last.stdout"
    err_path = Path(workdir or "/tmp") / "last.stderr"
    time_path = Path(workdir or "/tmp") / "last.time"
    time_path.unlink(missing_ok=True)
    if os.path.exists("/usr/bin/time"):
        # A small parent for the kernel's max-RSS figure: a child forked from this (large)
        # Python process would inherit its RSS as the starting max.
        cmd = ["/usr/bin/time", "-f", "%M", "-o", str(time_path)] + list(cmd)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        busy0 = cpu_busy_seconds()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        peak = [0]
        cpu_seen = {}  # (pid, start time) -> last CPU seconds seen
        done = threading.Event()

        def poll():
            import psutil
            try:
                root = psutil.Process(p.pid)
            except psutil.Error:
                return
            while not done.is_set():
                total = 0
                try:
                    procs = [root] + root.children(recursive=True)
                except psutil.Error:
                    procs = []
                for q in procs:
                    try:
                        total += q.memory_info().rss
                        ct = q.cpu_times()
                        cpu_seen[(q.pid, q.create_time())] = ct.user + ct.system
                    except psutil.Error:
                        pass
                peak[0] = max(peak[0], total)
                if time.perf_counter() - t0 > timeout:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                done.wait(0.02)

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        busy = cpu_busy_seconds() - busy0
        done.set()
        th.join()
        p.returncode = os.waitstatus_to_exitcode(status)
    # The kernel's figure misses processes nobody waited for (PySpark leaves its JVM to
    # init); the poller's misses the last few ms of each process. Take the larger.
    cpu = max(ru.ru_utime + ru.ru_stime, sum(cpu_seen.values()))
    # time's %M (KiB) is the largest single process; the poller sums the tree but may miss
    # the peak of a very short run. Report the larger of the two.
    max_rss_kib = 0
    try:
        max_rss_kib = int(time_path.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    peak_mb = max(peak[0] / 2**20, max_rss_kib / 1024)
    return Run(wall=wall, cpu=cpu, peak_mb=peak_mb,
               other_cores=max(0.0, (busy - cpu) / wall) if wall > 0 else 0.0,
               rc=p.returncode,
               stdout=out_path.read_text(errors="replace")[-4000:],
               stderr=err_path.read_text(errors="replace")[-4000:])


def split_csv(csv: Path, parts: Path, n: int) -> None:
    """Cuts csv into n files at line ends, each with the header line."""
    parts.mkdir(parents=True, exist_ok=True)
    size = csv.stat().st_size
    with open(csv, "rb") as f:
        header = f.readline()
        for i in range(n):
            end = size if i == n - 1 else max(f.tell(), size * (i + 1) // n)
            chunk = f.read(end - f.tell())
            chunk += f.readline()  # finish the line cut in the middle
            (parts / f"part-{i}.csv").write_bytes(header + chunk)
    (parts / "_done").write_text("")


def derived_data(con_sql: str) -> None:
    """Runs one DuckDB statement that writes a derived input file (workloads 6 and 7)."""
    import duckdb
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(con_sql)


def make_iso_csv(csv: Path, iso: Path) -> None:
    """The same CSV with ISO timestamps (`2024-02-24T14:11:08`): every column kept as text."""
    tmp = iso.with_name("." + iso.name)
    derived_data(f"""COPY (SELECT id, user_id, event_type, amount, replace(ts, ' ', 'T') AS ts, note
        FROM read_csv('{csv}', header = true, all_varchar = true))
        TO '{tmp}' (FORMAT csv, HEADER true, QUOTE '"')""")
    tmp.rename(iso)


def make_json(csv: Path, out: Path, n: int) -> None:
    """The first n rows of the CSV as JSON lines: numbers as numbers, ts as its text."""
    tmp = out.with_name("." + out.name)
    derived_data(f"""COPY (SELECT id, user_id, event_type, amount, ts, note FROM read_csv('{csv}',
        header = true, columns = {CSV_COLUMNS}) LIMIT {n}) TO '{tmp}' (FORMAT json)""")
    tmp.rename(out)


def machine() -> dict:
    import psutil
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


# ------------------------------------------------------------------------------ checking

def data_files(path: Path) -> list:
    """Files a tool wrote, leaving out its markers and staging (names starting . or _)."""
    if path.is_file():
        return [str(path)]
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        out += [os.path.join(root, f) for f in files if not f.startswith((".", "_"))]
    return sorted(out)


def checksum(files: list, fmt: str) -> list:
    import duckdb
    if not files:
        return [0] * len(CHECK_NAMES)
    flist = "[" + ", ".join(f"'{f}'" for f in files) + "]"
    if fmt == "parquet":
        rel = f"read_parquet({flist})"
    else:  # csv, or csv with a header line per file (csv_header)
        # Sling writes offsets as " +00", which DuckDB's cast does not read: make it "+00:00".
        rel = (f"(SELECT * REPLACE (regexp_replace(ts, ' ([+-][0-9][0-9])$', '\\1:00') AS ts) "
               f"FROM read_csv({flist}, header = {str(fmt == 'csv_header').lower()}, columns = {CSV_COLUMNS}))")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # text timestamps without an offset are UTC
    con.execute("SET enable_progress_bar = false")
    row = con.execute(CHECKSUM.format(rel=rel)).fetchone()
    return [int(x or 0) for x in row]


def expected_checksum(csv: Path, limit=None, where=" WHERE amount > 10") -> list:
    import duckdb
    rel = f"read_csv('{csv}', header = true, columns = {CSV_COLUMNS})"
    if limit is not None:
        rel = f"(SELECT * FROM {rel} LIMIT {limit})"
    q = CHECKSUM.format(rel=rel) + where
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    return [int(x) for x in con.execute(q).fetchone()]


# ----------------------------------------------------------------------------- workloads

@dataclass
class Tool:
    """One contender in a workload."""
    name: str
    cmd: list
    rounds: int
    kind: str = "tool"            # tool | reference
    output: str = ""              # "parquet" | "csv" | "" (nothing to check)
    env: dict = field(default_factory=dict)
    rows_from_stdout: bool = False  # blackhole workloads: rows as the tool reports them
    note: str = ""
    before: object = None           # called before each run (e.g. truncate a target table)
    db_check: object = None         # called after each successful run: the checksum of a table
    runs: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    out_bytes: int = 0


def ferry_rows(stdout: str, stderr: str) -> int:
    """Rows written to the sink, from Ferry's one-line summary."""
    import re
    # "ferry: job 'x' finished in 1.2 s: read 10 [t=10], wrote [Blackhole=10], 9 rows/s"
    m = re.findall(r"wrote \[([^\]]*)\]", stdout + "\n" + stderr)
    if not m:
        return -1
    return sum(int(n) for n in re.findall(r"=(\d+)", m[-1]))


def peer_rows(stdout: str) -> int:
    lines = [x for x in stdout.strip().splitlines() if x.strip()]
    try:
        return int(lines[-1])
    except (IndexError, ValueError):
        return -1


def run_workload(title, tools, workdir, env, expected=None, verbose=True):
    """Interleaves the tools round by round; checks each output after its run."""
    max_rounds = max(t.rounds for t in tools)
    for r in range(max_rounds):
        order = tools[r % len(tools):] + tools[:r % len(tools)]
        for t in order:
            if r >= t.rounds:
                continue
            out = workdir / "out"
            if out.exists():
                shutil.rmtree(out)
            out.mkdir(parents=True)
            cmd = [str(c).replace("{out}", str(out)) for c in t.cmd]
            if t.before:
                t.before()
            run = measure(cmd, env={**env, **t.env}, workdir=workdir)
            t.runs.append(run)
            status = "ok" if run.rc == 0 else f"FAILED rc={run.rc}"
            if run.rc != 0:
                sys.stderr.write(f"--- {t.name} stderr ---\n{run.stderr[-2000:]}\n")
            if t.db_check and run.rc == 0:
                t.checks.append(t.db_check())
            elif t.output and run.rc == 0:
                files = data_files(out)
                t.out_bytes = sum(os.path.getsize(f) for f in files)
                t.checks.append(parquet_checksum_jdbc(files) if t.output == "jdbc_parquet" else checksum(files, t.output))
            elif t.rows_from_stdout and run.rc == 0:
                rows = ferry_rows(run.stdout, run.stderr) if t.name.startswith("ferry") else peer_rows(run.stdout)
                t.checks.append([rows])
            if verbose:
                print(f"  [{title}] round {r + 1} {t.name:<28} {run.wall:8.3f} s "
                      f"{run.peak_mb:8.0f} MB  cpu {run.cpu:6.2f} s  other load {run.other_cores:4.2f}  {status}",
                      flush=True)
            shutil.rmtree(out, ignore_errors=True)
    return tools


def summarize(t: Tool, expected=None, expected_rows=None, names=CHECK_NAMES) -> dict:
    ok_runs = [r for r in t.runs if r.rc == 0]
    s = {"name": t.name, "kind": t.kind, "note": t.note, "runs": len(t.runs),
         "failed": len(t.runs) - len(ok_runs), "cmd": " ".join(shlex.quote(str(c)) for c in t.cmd)}
    if not ok_runs:
        s["verdict"] = "failed"
        s["error"] = (t.runs[-1].stderr.strip().splitlines() or ["?"])[-1][:300] if t.runs else "not run"
        return s
    walls = sorted(r.wall for r in ok_runs)
    med = statistics.median(walls)
    s.update({
        "wall_median": med, "wall_min": walls[0], "wall_max": walls[-1],
        "spread_pct": 100 * (walls[-1] - walls[0]) / med if med else 0,
        "peak_mb": statistics.median(r.peak_mb for r in ok_runs),
        "cores": statistics.median(r.cpu / r.wall for r in ok_runs),
        "cpu_s": statistics.median(r.cpu for r in ok_runs),
        "other_cores": statistics.median(r.other_cores for r in ok_runs),
        "out_mb": t.out_bytes / 2**20,
        "walls": [r.wall for r in ok_runs],
    })
    if t.checks:
        first = t.checks[0]
        consistent = all(c == first for c in t.checks)
        rows = first[0]
        s["rows"] = rows
        s["rows_per_s"] = rows / med if rows > 0 else None
        if expected is not None:
            s["verdict"] = "✓ same rows" if consistent and first == expected else "✗ different rows"
            if first != expected:
                diffs = [f"{n} {a} ≠ {b}" for n, a, b in zip(names, first, expected) if a != b]
                s["mismatch"] = diffs[0] + (f"; {len(diffs) - 1} more of the {len(names) - 1} sums differ too" if len(diffs) > 1 else "")
        elif expected_rows is not None:
            s["verdict"] = "✓ count" if consistent and rows == expected_rows else f"✗ {rows} rows"
        else:
            s["verdict"] = "–"
    else:
        s["verdict"] = "–"
    return s


# ------------------------------------------------------------------------------- report

def fmt_rate(x):
    if x is None:
        return "–"
    return f"{x / 1e6:.2f} M" if x >= 1e5 else f"{x:,.0f}"


def table(rows, startup=False) -> str:
    if startup:
        head = "| tool | median ms | min–max ms | spread | peak MB | runs | command |\n|---|---:|---:|---:|---:|---:|---|\n"
    else:
        head = ("| tool | rows/s | median s | min–max s | spread | peak MB | CPU s | cores used | other load | out MB | check | runs |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
    out = head
    for s in rows:
        name = s["name"] + (f" ({s['note']})" if s.get("note") else "")
        if "wall_median" not in s:
            out += f"| {name} | failed: {s.get('error', '')} |" + " |" * (6 if startup else 10) + "\n"
            continue
        if startup:
            out += (f"| {name} | {s['wall_median'] * 1000:.0f} | {s['wall_min'] * 1000:.0f}–{s['wall_max'] * 1000:.0f} "
                    f"| {s['spread_pct']:.0f} % | {s['peak_mb']:.0f} | {s['runs']} | `{s['cmd']}` |\n")
        else:
            check = s["verdict"] + (f" ({s['mismatch']})" if s.get("mismatch") else "")
            out += (f"| {name} | {fmt_rate(s.get('rows_per_s'))} | {s['wall_median']:.2f} | "
                    f"{s['wall_min']:.2f}–{s['wall_max']:.2f} | {s['spread_pct']:.0f} % | {s['peak_mb']:.0f} | "
                    f"{s.get('cpu_s', s['cores'] * s['wall_median']):.2f} | {s['cores']:.2f} | {s['other_cores']:.2f} | {s['out_mb']:.0f} | {check} | {s['runs']} |\n")
    return out


def chart(results: dict, path: Path, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    panels = []
    for key, label in (("csv_to_parquet", "1. CSV → Parquet"), ("generate", "2. generation → blackhole"),
                       ("sql", "3. FakeSource → Sql → Blackhole")):
        all_rows = [s for s in results.get(key, []) if s.get("rows_per_s")]
        rows = [s for s in all_rows if s["kind"] != "reference"]
        refs = [s for s in all_rows if s["kind"] == "reference"]
        if rows:
            extra = "".join(f"\n{s['name']}: {s['rows_per_s'] / 1e6:.0f} M rows/s" for s in refs)
            panels.append((label + ": rows/s (M), bars min–max" + extra, rows, lambda s: s["rows_per_s"] / 1e6,
                           lambda s: (s["rows"] / s["wall_max"] / 1e6, s["rows"] / s["wall_min"] / 1e6)))
            if key != "sql":
                panels.append((label + ": peak memory (MB)", rows, lambda s: s["peak_mb"], None))
    sm = [s for s in results.get("stream", []) if "burst_rows_per_s" in s]
    if sm:
        panels.append(("5. streaming, burst of files: rows/s (M) until committed, bars min–max", sm,
                       lambda s: s["burst_rows_per_s"] / 1e6,
                       lambda s: (s["burst_rows_per_s_min"] / 1e6, s["burst_rows_per_s_max"] / 1e6)))
        panels.append(("5. streaming, paced files: latency file → committed (s, median, bar to max)", sm,
                       lambda s: s["paced_latency_median"],
                       lambda s: (s["paced_latency_median"], s["paced_latency_max"])))
    st = [s for s in results.get("startup", []) if "wall_median" in s]
    if st:
        panels.append(("4. start-up, 10-row job: wall ms (log scale)", st, lambda s: s["wall_median"] * 1000,
                       lambda s: (s["wall_min"] * 1000, s["wall_max"] * 1000)))
    if not panels:
        return
    cols = 2
    nrows = (len(panels) + 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(14, 3.4 * nrows + 0.8), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (label, rows, val, err) in zip(axes.flat, panels):
        names = [s["name"] for s in rows]
        vals = [val(s) for s in rows]
        colors = ["#d95f02" if n.startswith("ferry") else "#1b9e77" for n in names]
        xerr, ends = None, vals
        if err:
            lo_hi = [err(s) for s in rows]
            xerr = [[max(0, v - lo) for v, (lo, hi) in zip(vals, lo_hi)],
                    [max(0, hi - v) for v, (lo, hi) in zip(vals, lo_hi)]]
            ends = [max(v, hi) for v, (lo, hi) in zip(vals, lo_hi)]
        ax.barh(names, vals, color=colors, xerr=xerr, capsize=3)
        ax.invert_yaxis()
        ax.set_title(label, fontsize=9)
        if "log" in label:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        for i, (v, e) in enumerate(zip(vals, ends)):
            ax.text(e * (1.05 if "log" in label else 1.0), i, f"  {v:,.0f}" if v >= 100 else f"  {v:.3g}",
                    va="center", fontsize=8)
        ax.set_xlim(right=max(ends) * (3 if "log" in label else 1.25))
        ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sling_bin() -> str:
    """The binary the sling-linux-amd64 wheel ships (it installs no script of its own)."""
    found = sorted((HERE / ".venv" / "lib").glob("python3*/site-packages/sling_linux_amd64/bin/sling-linux-amd64"))
    return str(found[0]) if found else "sling-not-installed"


def versions(ferry: str) -> dict:
    v = {}
    try:
        v["ferry"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
    except OSError:
        v["ferry"] = "?"
    # The tree may have moved on since the binary was built: say when it was built.
    try:
        built = dt.datetime.fromtimestamp(os.path.getmtime(ferry), dt.timezone.utc)
        v["ferry"] = f"{v['ferry']} (HEAD when run; binary built {built:%Y-%m-%d %H:%M} UTC)"
    except OSError:
        pass
    try:
        r = subprocess.run([str(HERE / ".venv" / "bin" / "duckdb"), "--version"], capture_output=True, text=True)
        v["duckdb-cli"] = " ".join(r.stdout.split()[:1]) or "?"
    except OSError:  # duckdb-cli is only needed for Sling (workload 1)
        v["duckdb-cli"] = "missing"
    for mod in ("duckdb", "polars", "pyarrow", "pyspark"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing peer is reported, not fatal
            v[mod] = "missing"
    if FLINK_PY.exists():
        r = subprocess.run([str(FLINK_PY), "-c", "import importlib.metadata as m; print(m.version('apache-flink'))"],
                           capture_output=True, text=True)
        v["apache-flink"] = r.stdout.strip() or "?"
    for label, cmd in (("postgresql", PSQL + ["-tAc", "SHOW server_version"]),
                       ("mariadb", MYSQL + ["-N", "-e", "SELECT version()"]),
                       ("duckdb (postgres scanner venv)", [str(PGSCAN_PY), "-c", "import duckdb; print(duckdb.__version__)"]),
                       ("adbc-driver-postgresql", [str(VENV_PY), "-c", "import adbc_driver_postgresql as a; print(a.__version__)"])):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp", timeout=30)
            if r.returncode == 0 and r.stdout.strip():
                v[label] = r.stdout.strip().split()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    sling = Path(sling_bin())
    if sling.exists():
        r = subprocess.run([str(sling), "--version"], capture_output=True, text=True)
        v["sling"] = (r.stdout.strip().splitlines() or ["?"])[-1].replace("Version: ", "")
    return v


def spark_venvs(args) -> list:
    """(label, venv) of each Ferry Spark engine to run: --spark-venv, else the one
    `ferry run --engine spark` finds by default."""
    if args.spark_venv:
        out = []
        for v in args.spark_venv:
            label, sep, path = v.partition("=")
            out.append((label, Path(path).expanduser()) if sep else (Path(v).name, Path(v).expanduser()))
        return out
    default = os.environ.get("FERRY_SPARK_VENV") or str(Path.home() / ".cache" / "ferry" / "spark-venv")
    return [("", Path(default))]


def spark_module_profile(venv: Path) -> str:
    """The cargo profile the venv's native module was built with, told by its code: a dev
    build keeps Rust's overflow checks (their panic messages are in the binary), release
    builds drop them. scripts/setup-spark builds dev unless FERRY_SPARK_PROFILE=release."""
    # `maturin develop` installs editable: the module sits in the source tree (python/ferry_spark/),
    # so every venv set up from this checkout loads the one built last. Ask the venv.
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import ferry_spark._native as n; print(n.__file__)"],
                       capture_output=True, text=True)
    so = Path(r.stdout.strip()) if r.returncode == 0 else None
    if so is None or not so.is_file():
        return "not installed"
    kind = "dev" if b"attempt to add with overflow" in so.read_bytes() else "release"
    return f"{kind} ({so}, {so.stat().st_size / 2**20:.0f} MB)"


def csv_checksum(files: list) -> list:
    """The checksum of every row of CSV files with a header line (no filter)."""
    import duckdb
    flist = "[" + ", ".join(f"'{f}'" for f in files) + "]"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    rel = f"read_csv({flist}, header = true, columns = {CSV_COLUMNS})"
    return [int(x) for x in con.execute(CHECKSUM.format(rel=rel)).fetchone()]


# ------------------------------------------------------------- workload 8: Jdbc (PostgreSQL)

PSQL = ["psql", "-h", "127.0.0.1", "-p", "5432", "-U", "postgres", "-d", "test", "-X", "-q", "-v", "ON_ERROR_STOP=1"]
MYSQL = ["mysql", "-h", "127.0.0.1", "-P", "3306", "-uroot"]
PGSCAN_PY = HERE / ".venv-pgscan" / "bin" / "python"
# (name, PostgreSQL expression over the source or a target table, DuckDB expression over
# a tool's Parquet output). The DuckDB side casts, so that a tool writing numeric as text
# (ADBC) or uuid as a string (Ferry) is checked on the values, not the physical type.
JDBC_CHECKS = [
    ("rows", "count(*)", "count(*)"),
    ("sum(id)", "sum(id)", "sum(CAST(id AS BIGINT))"),
    ("sum(user_id)", "sum(user_id)", "sum(CAST(user_id AS BIGINT))"),
    ("sum(qty)", "sum(qty)", "sum(CAST(qty AS BIGINT))"),
    ("sum(small)", "sum(small)", "sum(CAST(small AS BIGINT))"),
    ("sum(big)", "sum(big)", "sum(CAST(big AS BIGINT))"),
    ("sum(amount·100)", "sum(amount * 100)::int8", "sum(CAST(CAST(amount AS DECIMAL(14,2)) * 100 AS BIGINT))"),
    ("sum(round(score·1000))", "sum(round(score * 1000))::int8", "sum(CAST(round(CAST(score AS DOUBLE) * 1000) AS BIGINT))"),
    ("sum(len name)", "sum(length(name))", "sum(length(CAST(name AS VARCHAR)))"),
    ("sum(len code)", "sum(length(code))", "sum(length(CAST(code AS VARCHAR)))"),
    ("sum(flag)", "sum(flag::int)", "sum(CAST(flag AS INTEGER))"),
    ("sum(day)", "sum(day - date '1970-01-01')", "sum(date_diff('day', DATE '1970-01-01', CAST(day AS DATE)))"),
    ("sum(epoch ts)", "sum(extract(epoch from ts)::int8)", "sum(CAST(epoch(CAST(ts AS TIMESTAMP)) AS BIGINT))"),
    ("sum(epoch tstz)", "sum(extract(epoch from tstz)::int8)", "sum(CAST(epoch(CAST(tstz AS TIMESTAMPTZ)) AS BIGINT))"),
    ("sum(len uid text)", "sum(length(uid::text))", "sum(length(CAST(uid AS VARCHAR)))"),
    ("sum(bytes payload)", "sum(length(payload))", "sum(octet_length(CAST(payload AS BLOB)))"),
    ("sum(len note)", "sum(length(note))", "sum(length(CAST(note AS VARCHAR)))"),
]
JDBC_CHECK_NAMES = [c[0] for c in JDBC_CHECKS]


def psql(sql: str, *vars_) -> str:
    cmd = PSQL + ["-tA"] + [a for v in vars_ for a in ("-v", v)] + ["-c", sql]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd="/tmp").stdout.strip()


def pg_checksum(table: str) -> list:
    row = psql("SELECT " + ", ".join(c[1] for c in JDBC_CHECKS) + f" FROM {table}")
    return [int(x or 0) for x in row.split("|")]


def parquet_checksum_jdbc(files: list) -> list:
    import duckdb
    if not files:
        return [0] * len(JDBC_CHECKS)
    flist = "[" + ", ".join(f"'{f}'" for f in files) + "]"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    try:
        row = con.execute("SELECT " + ", ".join(c[2] for c in JDBC_CHECKS) + f" FROM read_parquet({flist})").fetchone()
    except duckdb.Error:
        # A column that cannot even be cast (e.g. bytes written as escaped text): -1 for it.
        row = []
        for c in JDBC_CHECKS:
            try:
                row.append(con.execute(f"SELECT {c[2]} FROM read_parquet({flist})").fetchone()[0])
            except duckdb.Error:
                row.append(-1)
    return [int(x or 0) for x in row]


def ensure_pg_table(rows: int) -> str:
    """ferry_bench.jdbc_<rows>: created once by bench/sql/jdbc_source.sql, then reused."""
    name = f"jdbc_{rows}"
    have = psql(f"SELECT count(*) FROM pg_tables WHERE schemaname = 'ferry_bench' AND tablename = '{name}'")
    if have == "1" and psql(f"SELECT count(*) FROM ferry_bench.{name}") == str(rows):
        return f"ferry_bench.{name}"
    print(f"bench: creating ferry_bench.{name} ({rows:,} rows) in PostgreSQL ...", flush=True)
    t = time.perf_counter()
    subprocess.run(PSQL + ["-v", f"rows={rows}", "-v", f"tbl={name}", "-f", str(HERE / "sql" / "jdbc_source.sql")],
                   check=True, cwd="/tmp")
    print(f"bench: created in {time.perf_counter() - t:.0f} s", flush=True)
    return f"ferry_bench.{name}"


def ensure_mariadb_table(pg_table: str, rows: int) -> str:
    """The same rows in MariaDB (ferry_bench.jdbc_<rows>), loaded once from a text COPY."""
    name = pg_table.split(".")[1]
    r = subprocess.run(MYSQL + ["-N", "-e", f"SELECT count(*) FROM ferry_bench.{name}"], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip() == str(rows):
        return f"ferry_bench.{name}"
    print(f"bench: loading ferry_bench.{name} into MariaDB ...", flush=True)
    tsv = Path("/tmp") / f"ferry_bench_{name}.tsv"
    psql(f"\\copy (SELECT id, user_id, qty, small, big, amount, score, name, code, flag::int, day, ts, "
         f"tstz AT TIME ZONE 'UTC', uid, encode(payload, 'hex'), note FROM {pg_table}) TO '{tsv}'")
    ddl = (HERE / "sql" / "jdbc_mariadb.sql").read_text().replace("jdbc_2m", name)
    subprocess.run(MYSQL, input=ddl, text=True, check=True)
    subprocess.run(MYSQL + ["--local-infile=1", "-e",
                            f"LOAD DATA LOCAL INFILE '{tsv}' INTO TABLE ferry_bench.{name} (id, user_id, qty, small, "
                            "big, amount, score, name, code, flag, day, ts, tstz, uid, @p, note) SET payload = UNHEX(@p)"],
                   check=True)
    tsv.unlink(missing_ok=True)
    return f"ferry_bench.{name}"


def jdbc_workload(args, ferry, env, work, fast, slow, want, results):
    jrows = args.jdbc_rows
    src = ensure_pg_table(jrows)
    print(f"bench: workload 8, Jdbc, {src} ({jrows:,} rows, "
          f"{psql(f'SELECT pg_size_pretty(pg_total_relation_size($${src}$$))')})", flush=True)
    t = time.perf_counter()
    expected = pg_checksum(src)
    print(f"bench: expected checksum in {time.perf_counter() - t:.1f} s: {expected}", flush=True)
    my = ensure_mariadb_table(src, jrows)
    target = "ferry_bench.jdbc_target"
    # No autovacuum on the target: the vacuum of one run's rows would land in the next
    # run's window, whichever tool it times.
    psql(f"DROP TABLE IF EXISTS {target}; "
         f"CREATE TABLE {target} (LIKE {src}) WITH (autovacuum_enabled = false)")
    py = str(VENV_PY)
    peer = str(PEERS)
    pgurl = "jdbc:postgresql://127.0.0.1:5432/test"

    def ferry_job(job, **variables):
        cmd = [ferry, "run", str(JOBS / job)]
        for k, v in variables.items():
            cmd += ["-i", f"{k}={v}"]
        return cmd

    # (a) PostgreSQL -> Snappy Parquet
    pq_job = ferry_job("jdbc_to_parquet.conf", table_path=f"test.{src}", output="{out}", parallelism=2)
    sling_env = {"PG": "postgresql://postgres@127.0.0.1:5432/test?sslmode=disable",
                 "DUCKDB_PATH": str(HERE / ".venv-pgscan" / "bin" / "duckdb")}
    tools = [
        Tool("ferry", pq_job, fast, output="jdbc_parquet"),
        Tool("ferry (A/A)", pq_job, fast, output="jdbc_parquet", note="same command again: the noise"),
        Tool("duckdb postgres scanner", [str(PGSCAN_PY), peer, "pg2pq-duckdb", src, "{out}"], fast, output="jdbc_parquet",
             note="duckdb-extension-postgres 1.5.5 from PyPI, duckdb 1.5.5"),
        Tool("adbc + pyarrow", [py, peer, "pg2pq-adbc", src, "{out}"], fast, output="jdbc_parquet",
             note="adbc-driver-postgresql → pyarrow ParquetWriter"),
        Tool("sling", [sling_bin(), "run", "--src-conn", "PG", "--src-stream", src, "--tgt-object",
                       "file://{out}/t.parquet"], slow, output="jdbc_parquet", env=sling_env,
             note="writes Parquet through the DuckDB CLI 1.5.5 (json and httpfs extensions from PyPI)"),
        Tool("psql \\copy binary → /dev/null", PSQL + ["-c", f"\\copy (SELECT * FROM {src}) TO '/dev/null' (FORMAT binary)"],
             fast, kind="reference"),
    ]
    tools = [t for t in tools if want(t.name)]
    run_workload("8a", tools, work, env)
    res = []
    for t in tools:
        s = summarize(t, expected if t.output else None, names=JDBC_CHECK_NAMES)
        if t.kind == "reference" and "wall_median" in s:
            s["rows"], s["rows_per_s"], s["verdict"] = jrows, jrows / s["wall_median"], "reference"
        res.append(s)
    results["jdbc_parquet"] = res

    # (b) PostgreSQL -> PostgreSQL, (c) MariaDB -> PostgreSQL: the target truncated before each run
    def truncate():
        psql(f"TRUNCATE {target}")

    def target_check():
        return pg_checksum(target)

    def to_pg(source_url, user, table_path, use_copy):
        return ferry_job("jdbc_to_jdbc.conf", source_url=source_url, source_user=user, table_path=table_path,
                         target=target, use_copy=str(use_copy).lower(), parallelism=2)

    pipe = (" ".join(shlex.quote(a) for a in PSQL) + " -c " +
            shlex.quote(f"\\copy (SELECT * FROM {src}) TO STDOUT (FORMAT binary)") + " | " +
            " ".join(shlex.quote(a) for a in PSQL) + " -c " + shlex.quote(f"\\copy {target} FROM STDIN (FORMAT binary)"))
    tools = [
        Tool("ferry, generated INSERTs", to_pg(pgurl, "postgres", f"test.{src}", False), fast,
             before=truncate, db_check=target_check),
        Tool("ferry, use_copy_statement", to_pg(pgurl, "postgres", f"test.{src}", True), fast,
             before=truncate, db_check=target_check),
        Tool("psql binary COPY pipe", ["bash", "-o", "pipefail", "-c", pipe], fast, before=truncate, db_check=target_check),
    ]
    tools = [t for t in tools if want(t.name)]
    run_workload("8b", tools, work, {**env, "PGAPPNAME": "ferry_bench"})
    results["jdbc_pg_pg"] = [summarize(t, expected, names=JDBC_CHECK_NAMES) for t in tools]

    myurl = "jdbc:mysql://127.0.0.1:3306/ferry_bench"
    tools = [
        Tool("ferry MariaDB → PostgreSQL, generated INSERTs", to_pg(myurl, "root", my, False), fast,
             before=truncate, db_check=target_check),
        Tool("ferry MariaDB → PostgreSQL, use_copy_statement", to_pg(myurl, "root", my, True), fast,
             before=truncate, db_check=target_check),
    ]
    tools = [t for t in tools if want(t.name)]
    run_workload("8c", tools, work, env)
    results["jdbc_mariadb_pg"] = [summarize(t, expected, names=JDBC_CHECK_NAMES) for t in tools]
    truncate()

    # Peak memory on a bigger table: Ferry alone, once.
    if args.jdbc_peak_rows:
        big = ensure_pg_table(args.jdbc_peak_rows)
        t = Tool("ferry", ferry_job("jdbc_to_parquet.conf", table_path=f"test.{big}", output="{out}", parallelism=2),
                 1, output="jdbc_parquet", note=f"{args.jdbc_peak_rows:,} rows, once: peak memory")
        run_workload("8a-peak", [t], work, env)
        s = summarize(t, None, names=JDBC_CHECK_NAMES)
        if t.checks:
            s["rows"] = t.checks[0][0]
            s["rows_per_s"] = s["rows"] / s["wall_median"] if "wall_median" in s else None
            s["verdict"] = "✓ count" if s["rows"] == args.jdbc_peak_rows else f"✗ {s['rows']} rows"
        results["jdbc_peak"] = [s]
    results.setdefault("_meta", {})["jdbc"] = {
        "rows": jrows, "table": src, "mariadb_table": my, "target": target,
        "expected": dict(zip(JDBC_CHECK_NAMES, expected)),
        "size": psql(f"SELECT pg_size_pretty(pg_total_relation_size('{src}'))")}


# --------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1M rows, fewer rounds (under 3 minutes)")
    ap.add_argument("--rows", type=int, help="rows of the generated data (default 10M, --quick 1M)")
    ap.add_argument("--rounds", type=int, help="rounds for the fast tools (default 5, --quick 3)")
    ap.add_argument("--slow-rounds", type=int, help="rounds for Spark, Flink and Sling (default 3/1)")
    ap.add_argument("--only", default="1,2,3,4,5,6,7",
                    help="workloads to run, e.g. 1,4 (5 or 'streaming': files arriving in a directory; "
                         "6: JSON lines → Parquet; 7: workload 1 with datetime_format patterns; "
                         "8: Jdbc, PostgreSQL → Parquet / PostgreSQL, MariaDB → PostgreSQL)")
    ap.add_argument("--jdbc-rows", type=int, default=2_000_000,
                    help="workload 8: rows of the PostgreSQL table (default 2M)")
    ap.add_argument("--jdbc-peak-rows", type=int, default=0,
                    help="workload 8: also run Ferry once on a table this big (e.g. 10000000) for its peak memory")
    ap.add_argument("--json-rows", type=int, help="rows of workload 6's JSON file (default 3M, --quick 1M)")
    ap.add_argument("--skip", default="", help="tools to leave out by first word, e.g. flink,sling (py- optional)")
    ap.add_argument("--name", help="results file name (default: the mode, quick or full)")
    ap.add_argument("--stream-files", type=int, default=20, help="streaming: burst files (default 20)")
    ap.add_argument("--stream-rows", type=int, help="streaming: rows per file (default 500k, --quick 50k)")
    ap.add_argument("--stream-paced", type=int, default=5, help="streaming: paced files (default 5)")
    ap.add_argument("--stream-pace", type=float, help="streaming: seconds between paced files (default 4, --quick 1.5)")
    ap.add_argument("--spark-venv", action="append", default=[], metavar="LABEL=PATH",
                    help="a Ferry Spark engine venv to run 'ferry on spark' with (repeatable; default: "
                         "$FERRY_SPARK_VENV or ~/.cache/ferry/spark-venv, unlabelled)")
    ap.add_argument("--ferry", required=True, help="path of the ferry binary")
    ap.add_argument("--command", default="", help="the command line to record")
    args = ap.parse_args()

    mode = "quick" if args.quick else "full"
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    fast = args.rounds or (3 if args.quick else 5)
    slow = args.slow_rounds or (1 if args.quick else 3)
    only = {5 if x.strip() == "streaming" else int(x) for x in args.only.split(",") if x.strip()}
    name = args.name or mode
    skip = {x.strip().lower() for x in args.skip.split(",") if x.strip()}
    ferry = str(Path(args.ferry).resolve())

    data = HERE / "data"
    work = HERE / "data" / "work"
    data.mkdir(exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    env = {**os.environ, "TZ": "UTC", "PYSPARK_PYTHON": str(VENV_PY), "DUCKDB_PATH": str(HERE / ".venv" / "bin" / "duckdb")}
    env.pop("RUST_LOG", None)
    started = dt.datetime.now(dt.timezone.utc)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    results = {}
    print(f"bench: mode {mode}, {rows:,} rows, {fast} rounds (slow tools {slow}), machine {machine()}", flush=True)

    def want(tool):
        first = tool.lower().split()[0]
        return first not in skip and first.removeprefix("py") not in skip

    # ---- data
    csv = data / f"events_{rows}.csv"
    meta = data / f"events_{rows}.json"
    need_csv = bool(only - {8})  # workload 8 reads a database table, not the CSV
    if need_csv and (not csv.exists() or not meta.exists()):
        print(f"bench: generating {csv} ...", flush=True)
        t = time.perf_counter()
        subprocess.run([str(VENV_PY), str(HERE / "gen_data.py"), str(csv), str(rows)], check=True)
        meta.write_text(json.dumps({"expected": expected_checksum(csv)}))
        print(f"bench: generated in {time.perf_counter() - t:.1f} s", flush=True)
    expected = json.loads(meta.read_text())["expected"] if need_csv else [0] * len(CHECK_NAMES)
    csv_mb = csv.stat().st_size / 2**20 if need_csv else 0.0
    # The same rows cut into 4 files: Ferry's file source reads one split per file, so this
    # shows what its readers gain from more than one file (peers read the single file).
    parts = data / f"events_{rows}_parts"
    if 1 in only and not (parts / "_done").exists():
        split_csv(csv, parts, 4)
    py = str(VENV_PY)
    peer = str(PEERS)

    def ferry_job(job, **variables):
        cmd = [ferry, "run", str(JOBS / job)]
        for k, v in variables.items():
            cmd += ["-i", f"{k}={v}"]
        return cmd

    # Ferry on Spark (issue 4): the same job file through `ferry run --engine spark`, local[2]
    # as the PySpark peer, once per Spark engine venv (e.g. dev and release native module).
    venvs = [(label, v) for label, v in spark_venvs(args) if (v / "bin" / "python").exists()]
    spark_profiles = {label or "default": f"{v} — native module {spark_module_profile(v)}" for label, v in venvs}

    def ferry_spark(job, label, venv, **variables):
        cmd = ferry_job(job, **variables)
        return cmd[:2] + ["--engine", "spark", "--master", "local[2]"] + cmd[2:], {"FERRY_SPARK_VENV": str(venv)}

    ferry_spark_tools = []
    if venvs and not args.quick:
        # Plain PySpark on the Spark of Ferry's engine venv (pinned to 4.1), beside the peer venv's
        # newest PySpark: the like-for-like baseline of issue 4.
        vpy = venvs[0][1] / "bin" / "python"
        r = subprocess.run([str(vpy), "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True)
        ferry_spark_tools.append(Tool(f"pyspark {r.stdout.strip()} local[2]", [str(vpy), peer, "csv2pq-spark", csv, "{out}"],
                                      slow, output="parquet", env={"PYSPARK_PYTHON": str(vpy)},
                                      note="the Spark of Ferry's engine venv: the same Spark as Ferry on Spark"))
    for label, v in venvs:
        suffix = f" ({label})" if label else ""
        prof = spark_module_profile(v).split()[0]
        cmd, fenv = ferry_spark("csv_to_parquet.conf", label, v, input=csv, output="{out}", parallelism=2)
        ferry_spark_tools.append(Tool("ferry on spark local[2]" + suffix, cmd, slow, output="parquet", env=fenv,
                                      note=f"{prof} native module; one input file = one split = one busy Spark task"))
        if not args.quick:
            cmd, fenv = ferry_spark("csv_to_parquet.conf", label, v, input=parts, output="{out}", parallelism=2)
            ferry_spark_tools.append(Tool("ferry on spark local[2], 4 input files" + suffix, cmd, slow,
                                          output="parquet", env=fenv, note=f"{prof} native module; 2 tasks busy"))

    # ---- workload 1
    if 1 in only:
        subprocess.run(["cat", str(csv)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        fjob = ferry_job("csv_to_parquet.conf", input=csv, output="{out}", parallelism=2)
        tools = [
            Tool("ferry", fjob, fast, output="parquet"),
            Tool("ferry (A/A)", fjob, fast, output="parquet", note="same command again: the noise"),
            Tool("ferry, 4 input files", ferry_job("csv_to_parquet.conf", input=parts, output="{out}", parallelism=2),
                 fast, output="parquet", note="the same rows cut into 4 files: 2 readers busy"),
            Tool("duckdb", [py, peer, "csv2pq-duckdb", csv, "{out}"], fast, output="parquet"),
            Tool("polars", [py, peer, "csv2pq-polars", csv, "{out}"], fast, output="parquet"),
            Tool("pyarrow", [py, peer, "csv2pq-pyarrow", csv, "{out}"], fast, output="parquet"),
            Tool("pyspark local[2]", [py, peer, "csv2pq-spark", csv, "{out}"], slow, output="parquet"),
            *ferry_spark_tools,
            Tool("pyflink", [str(FLINK_PY), peer, "csv2pq-flink", csv, "{out}"], slow, output="csv",
                 note="writes CSV: no Parquet jar offline"),
            Tool("sling", [sling_bin(), "run", "--src-stream", f"file://{csv}",
                           "--tgt-object", "file://{out}/",
                           "--tgt-options", "{format: csv, file_max_rows: 1000000}",
                           "--where", "amount > 10"], 1, output="csv_header",
                 env={"HOME": str(data / "sling-home")},
                 note="writes CSV: its Parquet path needs DuckDB's httpfs extension, not installable offline; "
                      "ignores --where for file → file"),
            Tool("cat input (page cache)", ["cat", str(csv)], fast, kind="reference"),
        ]
        tools = [t for t in tools if want(t.name) and (t.kind == "reference" or t.name.startswith("ferry")
                                                        or Path(t.cmd[0]).exists())]
        print(f"bench: workload 1, CSV → Parquet, {csv_mb:.0f} MB", flush=True)
        run_workload("1", tools, work, env)
        # dd writes as many bytes as Ferry's output held (page cache, as the tools' writes).
        ferry_bytes = tools[0].out_bytes or max(t.out_bytes for t in tools)
        dd = Tool("dd of the output size", ["dd", "if=/dev/zero", f"of={work}/dd.out", "bs=1M",
                                            f"count={max(1, round(ferry_bytes / 2**20))}"], fast, kind="reference")
        run_workload("1", [dd], work, env)
        Path(f"{work}/dd.out").unlink(missing_ok=True)
        tools.append(dd)
        res = []
        for t in tools:
            s = summarize(t, expected if t.output else None)
            if t.kind == "reference" and "wall_median" in s:
                # Rows per second the physical operation alone would allow.
                n = rows if t.name.startswith("cat") else expected[0]
                s["rows"], s["rows_per_s"] = n, n / s["wall_median"]
                s["verdict"] = "reference"
            res.append(s)
        results["csv_to_parquet"] = res

    # ---- workload 6: JSON lines -> Parquet
    if 6 in only:
        jrows = min(rows, args.json_rows or (1_000_000 if args.quick else 3_000_000))
        jfile = data / f"events_{rows}_first{jrows}.json"
        jmeta = data / f"events_{rows}_first{jrows}.expected.json"
        if not jfile.exists() or not jmeta.exists():
            print(f"bench: writing {jfile} ...", flush=True)
            make_json(csv, jfile, jrows)
            jmeta.write_text(json.dumps({"expected": expected_checksum(csv, limit=jrows, where="")}))
        jexpected = json.loads(jmeta.read_text())["expected"]
        subprocess.run(["cat", str(jfile)], stdout=subprocess.DEVNULL, check=True)
        fjob = ferry_job("json_to_parquet.conf", input=jfile, output="{out}", parallelism=2)
        tools = [
            Tool("ferry", fjob, fast, output="parquet"),
            Tool("ferry (A/A)", fjob, fast, output="parquet", note="same command again: the noise"),
            Tool("ferry, parallelism 1", ferry_job("json_to_parquet.conf", input=jfile, output="{out}", parallelism=1),
                 fast, output="parquet", note="one reader: the file is not split"),
            Tool("duckdb read_json", [py, peer, "json2pq-duckdb", jfile, "{out}"], fast, output="parquet"),
            Tool("polars scan_ndjson", [py, peer, "json2pq-polars", jfile, "{out}"], fast, output="parquet"),
            Tool("cat input (page cache)", ["cat", str(jfile)], fast, kind="reference"),
        ]
        tools = [t for t in tools if want(t.name)]
        print(f"bench: workload 6, JSON lines → Parquet, {jrows:,} rows, {jfile.stat().st_size / 2**20:.0f} MB", flush=True)
        run_workload("6", tools, work, env)
        res = []
        for t in tools:
            s = summarize(t, jexpected if t.output else None)
            if t.kind == "reference" and "wall_median" in s:
                s["rows"], s["rows_per_s"], s["verdict"] = jrows, jrows / s["wall_median"], "reference"
            res.append(s)
        results["json_to_parquet"] = res
        results_meta = results.setdefault("_meta", {})
        results_meta["json"] = {"rows": jrows, "mb": jfile.stat().st_size / 2**20, "file": str(jfile)}

    # ---- workload 7: workload 1 with datetime_format patterns
    if 7 in only:
        iso = data / f"events_{rows}_iso.csv"
        if not iso.exists():
            print(f"bench: writing {iso} ...", flush=True)
            make_iso_csv(csv, iso)
        subprocess.run(["cat", str(iso)], stdout=subprocess.DEVNULL, check=True)

        def pjob(src, pattern):
            return ferry_job("csv_to_parquet_pattern.conf", input=src, output="{out}", parallelism=2,
                             datetime_format=pattern)
        tools = [
            Tool("ferry, ISO data, no pattern", pjob(iso, "yyyy-MM-dd HH:mm:ss"), fast, output="parquet",
                 note="the default pattern: arrow-csv's own lenient timestamp parser"),
            Tool("ferry, ISO data, yyyy-MM-dd'T'HH:mm:ss", pjob(iso, "yyyy-MM-dd'T'HH:mm:ss"), fast, output="parquet",
                 note="a quoted literal"),
            Tool("ferry, ISO data, uuuu-MM-dd'T'HH:mm:ss", pjob(iso, "uuuu-MM-dd'T'HH:mm:ss"), fast, output="parquet",
                 note="the same in another spelling"),
            Tool("ferry, no pattern", pjob(csv, "yyyy-MM-dd HH:mm:ss"), fast, output="parquet",
                 note="workload 1's file and job"),
            Tool("ferry, yyyy-MM-dd HH:mm:ss.SSS on workload 1's data", pjob(csv, "yyyy-MM-dd HH:mm:ss.SSS"), fast,
                 output="parquet", note="every value misses the pattern and falls back to the default forms: the worst case"),
            Tool("duckdb, ISO data", [py, peer, "csv2pq-duckdb-iso", iso, "{out}"], fast, output="parquet"),
        ]
        tools = [t for t in tools if want(t.name)]
        print(f"bench: workload 7, CSV → Parquet with datetime_format patterns, {iso.stat().st_size / 2**20:.0f} MB", flush=True)
        run_workload("7", tools, work, env)
        results["patterns"] = [summarize(t, expected) for t in tools]

    # ---- workload 2 + 3
    gen_rows = rows
    per_reader = gen_rows // 2
    plain = ferry_job("fake_blackhole.conf", rows_per_reader=per_reader, parallelism=2)
    if 2 in only:
        tools = [
            Tool("ferry FakeSource", plain, fast, rows_from_stdout=True),
            Tool("ferry FakeSource (A/A)", plain, fast, rows_from_stdout=True, note="the noise"),
            Tool("duckdb range", [py, peer, "gen-duckdb", gen_rows], fast, rows_from_stdout=True),
            Tool("polars int_range", [py, peer, "gen-polars", gen_rows], fast, rows_from_stdout=True),
        ]
        if not args.quick:  # in --quick mode the JVM tools run in workload 1 only
            tools += [
                Tool("pyspark range → noop", [py, peer, "gen-spark", gen_rows], slow, rows_from_stdout=True),
                Tool("pyflink datagen → blackhole", [str(FLINK_PY), peer, "gen-flink", gen_rows], slow,
                     rows_from_stdout=True),
            ]
        tools = [t for t in tools if want(t.name) and (t.name.startswith("ferry") or Path(t.cmd[0]).exists())]
        print(f"bench: workload 2, generation → blackhole, {gen_rows:,} rows", flush=True)
        run_workload("2", tools, work, env)
        results["generate"] = [summarize(t, expected_rows=gen_rows) for t in tools]
    if 3 in only:
        sql = ferry_job("fake_sql_blackhole.conf", rows_per_reader=per_reader, parallelism=2)
        tools = [Tool("ferry FakeSource → Blackhole", plain, fast, rows_from_stdout=True),
                 Tool("ferry FakeSource → Sql → Blackhole", sql, fast, rows_from_stdout=True)]
        print(f"bench: workload 3, Sql transform cost, {gen_rows:,} rows", flush=True)
        run_workload("3", tools, work, env)
        res = [summarize(t) for t in tools]
        for s in res:
            if "wall_median" in s:
                s["input_rows_per_s"] = gen_rows / s["wall_median"]
                s["rows_per_s"] = s["input_rows_per_s"]  # both jobs read the same rows
        results["sql"] = res

    # ---- workload 4
    if 4 in only:
        many = fast * 4
        tools = [
            Tool("ferry", [ferry, "run", str(JOBS / "tiny.conf")], many),
            Tool("ferry (A/A)", [ferry, "run", str(JOBS / "tiny.conf")], many, note="the noise"),
            Tool("duckdb cli", [str(HERE / ".venv" / "bin" / "duckdb"), "-c", "SELECT * FROM range(10)"], many),
            Tool("python + duckdb", [py, peer, "tiny-duckdb"], fast),
            Tool("python + polars", [py, peer, "tiny-polars"], fast),
        ]
        if not args.quick:
            tools += [Tool("pyspark local[2]", [py, peer, "tiny-spark"], slow),
                      Tool("pyflink", [str(FLINK_PY), peer, "tiny-flink"], slow)]
        tools = [t for t in tools if want(t.name) and (t.name.startswith("ferry") or Path(t.cmd[0]).exists())]
        print("bench: workload 4, start-up of a 10-row job", flush=True)
        run_workload("4", tools, work, env)
        results["startup"] = [summarize(t) for t in tools]

    # ---- workload 8: Jdbc (issue 14's workload 5)
    if 8 in only:
        jdbc_workload(args, ferry, env, work, fast, slow, want, results)

    # ---- workload 5: streaming (issue 6's workload 3)
    stream_info = None
    if 5 in only:
        import stream
        srows = args.stream_rows or (50_000 if args.quick else 500_000)
        pace = args.stream_pace or (1.5 if args.quick else 4.0)
        print(f"bench: streaming, {args.stream_files} × {srows:,} rows at once, then {args.stream_paced} "
              f"× {srows:,} one every {pace:g} s", flush=True)
        sdata = stream.prepare(data, args.stream_files, srows, args.stream_paced, csv_checksum)
        sjob = JOBS / "stream_csv_to_parquet.conf"
        fvars = ["-i", "input={in}", "-i", "output={out}", "-i", "parallelism=2"]
        stools = [stream.StreamTool("ferry", [ferry, "run", str(sjob), *fvars, "--job-id", "bench",
                                              "--checkpoint-dir", "{ck}"], slow),
                  stream.StreamTool("ferry, checkpoint.on-idle", [ferry, "run", str(sjob), *fvars, "-i", "on_idle=true",
                                                                  "--job-id", "bench", "--checkpoint-dir", "{ck}"], slow,
                                    note="also checkpoints once both readers have caught up")]
        if not args.quick:  # as in workloads 2 and 4, the JVM tools run in workload 1 only in --quick mode
            for label, v in venvs:
                stools.append(stream.StreamTool(
                    "ferry on spark local[2]" + (f" ({label})" if label else ""),
                    [ferry, "run", "--engine", "spark", "--master", "local[2]", str(sjob), *fvars,
                     "--job-id", "bench", "--checkpoint-dir", "{ck}"], slow,
                    env={"FERRY_SPARK_VENV": str(v)}, note=f"{spark_module_profile(v).split()[0]} native module"))
            stools += [
                stream.StreamTool("pyspark structured streaming local[2]", [py, peer, "stream-spark", "{in}", "{out}", "{ck}"],
                                  slow, protocol="spark", note="file source → parquet file sink, trigger 1 s"),
                stream.StreamTool("pyflink streaming", [str(FLINK_PY), peer, "stream-flink", "{in}", "{out}"], slow,
                                  fmt="csv", note="writes CSV: no Parquet jar offline; checkpoint 1 s, monitor 200 ms"),
            ]
        stools = [t for t in stools if want(t.name) and (t.name.startswith("ferry") or Path(t.cmd[0]).exists())]
        stream.run_workload(stools, sdata, work, env, pace, timeout=900, checksum=checksum)
        results["stream"] = [stream.summarize(t, sdata, CHECK_NAMES) for t in stools]
        stream_info = {"files": sdata.files, "rows_per_file": sdata.rows, "paced": sdata.paced, "pace_s": pace,
                       "warmup_rows": stream.WARMUP_ROWS,
                       "expected": dict(zip(CHECK_NAMES, sdata.expected))}

    elapsed = time.perf_counter() - t_start
    report = {
        "mode": mode, "rows": rows, "csv_mb": csv_mb, "rounds": fast, "slow_rounds": slow,
        "started": started.isoformat(timespec="seconds"), "elapsed_s": elapsed,
        "command": args.command.strip() or " ".join(shlex.quote(a) for a in sys.argv),
        "machine": machine(), "load_start": load_start, "load_end": os.getloadavg(),
        "versions": {**versions(ferry), **{f"ferry on spark {k}": x for k, x in spark_profiles.items()}},
        "expected": dict(zip(CHECK_NAMES, expected)), "results": results, "stream": stream_info,
        "workloads": sorted(only),
    }
    (results_dir / f"{name}.json").write_text(json.dumps(report, indent=1, default=str))
    chart(results, results_dir / f"{name}.png",
          f"Ferry vs peers — {mode} mode, {rows:,} rows, {report['machine']['nproc']} cores "
          f"({report['machine']['cpu_model']}), {report['started']}")
    (results_dir / f"{name}.md").write_text(markdown(report))
    print(f"bench: done in {elapsed:.0f} s → {results_dir / (name + '.md')}", flush=True)


def target_lines(rep) -> list:
    """The issues' targets, met or not, from this run's figures."""
    res = rep["results"]
    lines = []

    def get(key, name):
        return next((s for s in res.get(key, []) if s["name"] == name
                     and ("wall_median" in s or "burst_rows_per_s" in s)), None)

    f = get("csv_to_parquet", "ferry")
    if f:
        ok = f.get("rows_per_s", 0) >= 2e6
        lines.append(f"| issue 2 | CSV → Parquet ≥ 2 M rows/s on 2 cores | {fmt_rate(f.get('rows_per_s'))} rows/s | {'✓' if ok else '✗'} |")
        for peer in ("duckdb", "polars"):
            p = get("csv_to_parquet", peer)
            if p:
                ok = f["wall_median"] <= p["wall_median"]
                ratio = p["wall_median"] / f["wall_median"]
                # A lead smaller than Ferry's own run-to-run spread is not a lead.
                noise = max(f["spread_pct"], p["spread_pct"])
                close = abs(ratio - 1) <= noise / 100
                verdict = ("✓" if ok else "✗") + (f" (within the noise: spread up to {noise:.0f} %)" if close else "")
                lines.append(f"| issue 6 | CSV → Parquet no slower than {peer} | ferry {f['wall_median']:.2f} s vs {p['wall_median']:.2f} s "
                             f"({ratio:.2f}×) | {verdict} |")
        for peer, factor in (("pyspark local[2]", 8), ("pyflink", 10)):
            p = get("csv_to_parquet", peer)
            if p:
                ratio = p["wall_median"] / f["wall_median"]
                lines.append(f"| issue 6 | CSV → Parquet ≥ {factor}× {peer} | {ratio:.1f}× | {'✓' if ratio >= factor else '✗'} |")
        others = [s for s in res["csv_to_parquet"] if "wall_median" in s and s["kind"] == "tool" and not s["name"].startswith("ferry")]
        if others:
            lowest = min(others, key=lambda s: s["peak_mb"])
            ok = f["peak_mb"] < lowest["peak_mb"]
            lines.append(f"| issue 6 | peak memory below every peer | ferry {f['peak_mb']:.0f} MB vs lowest {lowest['name']} {lowest['peak_mb']:.0f} MB | {'✓' if ok else '✗'} |")
    # Issue 4: Ferry on Spark no slower than plain PySpark on the batch job.
    same = [s for s in res.get("csv_to_parquet", []) if s["name"].startswith("pyspark 4") and "wall_median" in s]
    ps = same[0] if same else get("csv_to_parquet", "pyspark local[2]")
    for s in res.get("csv_to_parquet", []):
        if s["name"].startswith("ferry on spark") and "wall_median" in s and ps:
            ratio = s["wall_median"] / ps["wall_median"]
            noise = max(s["spread_pct"], ps["spread_pct"])
            ok = s["wall_median"] <= ps["wall_median"]
            close = abs(ratio - 1) <= noise / 100
            lines.append(f"| issue 4 | {s['name']}: CSV → Parquet no slower than plain PySpark ({ps['name']}) | "
                         f"{s['wall_median']:.1f} s vs {ps['wall_median']:.1f} s ({ratio:.2f}× its time) | "
                         f"{'✓' if ok else '✗'}{f' (within the noise: spread up to {noise:.0f} %)' if close else ''} |")
    # Issue 6: streaming at least 5x Spark Structured Streaming's throughput at lower latency.
    ss = get("stream", "pyspark structured streaming local[2]")
    for fs in [get("stream", "ferry"), get("stream", "ferry, checkpoint.on-idle")]:
        if not (fs and ss):
            continue
        ratio = fs["burst_rows_per_s"] / ss["burst_rows_per_s"]
        lower = fs["paced_latency_median"] < ss["paced_latency_median"]
        cpu_ratio = ss["burst_cpu_s"] / fs["burst_cpu_s"] if fs["burst_cpu_s"] else float("nan")
        lines.append(f"| issue 6 | {fs['name']}: streaming ≥ 5× Spark Structured Streaming throughput | {ratio:.1f}× "
                     f"({fmt_rate(fs['burst_rows_per_s'])} vs {fmt_rate(ss['burst_rows_per_s'])} rows/s, medians of the "
                     f"burst; in CPU time for the same rows {cpu_ratio:.1f}×: {fs['burst_cpu_s']:.1f} s vs "
                     f"{ss['burst_cpu_s']:.1f} s) | {'✓' if ratio >= 5 else '✗'} |")
        lines.append(f"| issue 6 | {fs['name']}: … at lower latency (file → committed, paced files, median) | "
                     f"{fs['paced_latency_median']:.2f} s vs {ss['paced_latency_median']:.2f} s | {'✓' if lower else '✗'} |")
    plain = get("sql", "ferry FakeSource → Blackhole")
    sql = get("sql", "ferry FakeSource → Sql → Blackhole")
    if plain and sql:
        cost = 1 - plain["wall_median"] / sql["wall_median"]
        lines.append(f"| issue 5 | Sql transform costs < 30 % of the no-transform throughput | {100 * cost:.0f} % "
                     f"({fmt_rate(sql['rows_per_s'])} vs {fmt_rate(plain['rows_per_s'])} rows/s) | {'✓' if cost < 0.30 else '✗'} |")
    # Issue 13: JSON lines no slower than DuckDB; timestamp patterns within 10 % of none.
    jf = get("json_to_parquet", "ferry")
    jd = get("json_to_parquet", "duckdb read_json")
    if jf and jd:
        ratio = jd["wall_median"] / jf["wall_median"]
        noise = max(jf["spread_pct"], jd["spread_pct"])
        close = abs(ratio - 1) <= noise / 100
        lines.append(f"| issue 13 | JSON lines → Parquet no slower than DuckDB | ferry {jf['wall_median']:.2f} s vs "
                     f"{jd['wall_median']:.2f} s ({ratio:.2f}×) | {'✓' if jf['wall_median'] <= jd['wall_median'] else '✗'}"
                     f"{f' (within the noise: spread up to {noise:.0f} %)' if close else ''} |")
    base = get("patterns", "ferry, ISO data, no pattern")
    for s in res.get("patterns", []):
        if base and s is not base and s["name"].startswith("ferry, ISO data") and "wall_median" in s:
            slower = s["wall_median"] / base["wall_median"] - 1
            lines.append(f"| issue 13 | {s['name'].removeprefix('ferry, ISO data, ')} within 10 % of no pattern | "
                         f"{s['wall_median']:.2f} s vs {base['wall_median']:.2f} s ({100 * slower:+.0f} %; CPU "
                         f"{s['cpu_s']:.2f} s vs {base['cpu_s']:.2f} s) | {'✓' if slower <= 0.10 else '✗'} |")
    # Issue 14 (its "workload 5"; workload 8 here): Jdbc.
    jf = get("jdbc_parquet", "ferry")
    for peer in ("duckdb postgres scanner", "adbc + pyarrow", "sling"):
        p = get("jdbc_parquet", peer)
        if jf and p:
            ratio = p["wall_median"] / jf["wall_median"]
            noise = max(jf["spread_pct"], p["spread_pct"])
            close = abs(ratio - 1) <= noise / 100
            must = peer.startswith("duckdb")
            lines.append(f"| issue 14 | PostgreSQL → Parquet {'no slower than' if must else 'vs'} {peer} | ferry "
                         f"{jf['wall_median']:.2f} s vs {p['wall_median']:.2f} s ({ratio:.2f}×; CPU {jf['cpu_s']:.1f} s vs "
                         f"{p['cpu_s']:.1f} s) | {('✓' if jf['wall_median'] <= p['wall_median'] else '✗') if must else '(no target)'}"
                         f"{f' (within the noise: spread up to {noise:.0f} %)' if close and must else ''} |")
    raw = get("jdbc_parquet", "psql \\copy binary → /dev/null")
    if jf and raw:
        lines.append(f"| issue 14 | heading for the raw binary COPY rate (psql \\copy to /dev/null) | ferry "
                     f"{fmt_rate(jf.get('rows_per_s'))} rows/s vs {fmt_rate(raw.get('rows_per_s'))} rows/s "
                     f"({100 * jf['rows_per_s'] / raw['rows_per_s']:.0f} % of it) | (direction) |")
    pipe = get("jdbc_pg_pg", "psql binary COPY pipe")
    for name in ("ferry, generated INSERTs", "ferry, use_copy_statement"):
        f = get("jdbc_pg_pg", name)
        if f and pipe:
            ratio = pipe["wall_median"] / f["wall_median"]
            noise = max(f["spread_pct"], pipe["spread_pct"])
            close = abs(ratio - 1) <= noise / 100
            lines.append(f"| issue 14 | PostgreSQL → PostgreSQL ({name.removeprefix('ferry, ')}) no slower than the psql binary COPY pipe | "
                         f"{f['wall_median']:.2f} s vs {pipe['wall_median']:.2f} s ({ratio:.2f}×) | "
                         f"{'✓' if f['wall_median'] <= pipe['wall_median'] else '✗'}"
                         f"{f' (within the noise: spread up to {noise:.0f} %)' if close else ''} |")
    for s in res.get("jdbc_mariadb_pg", []):
        if "wall_median" in s:
            lines.append(f"| issue 14 | {s['name'].removeprefix('ferry ')} (no peer: recorded) | {fmt_rate(s.get('rows_per_s'))} rows/s, "
                         f"{s['wall_median']:.2f} s | – |")
    pk = (res.get("jdbc_peak") or [None])[0]
    if pk and "wall_median" in pk:
        lines.append(f"| issue 14 | peak memory < 300 MB, PostgreSQL → Parquet of a {pk.get('rows', 0):,}-row table | "
                     f"{pk['peak_mb']:.0f} MB | {'✓' if pk['peak_mb'] < 300 else '✗'} |")
    st = get("startup", "ferry")
    if st:
        lines.append(f"| issue 6 | start-up of a small job < 50 ms | {st['wall_median'] * 1000:.0f} ms | {'✓' if st['wall_median'] < 0.05 else '✗'} |")
    return lines


def stream_section(rep) -> list:
    """The streaming workload's table and how it was measured."""
    st = rep["stream"]
    rows = st["rows_per_file"]
    out = ["## 5. Streaming: files arriving in a directory → Parquet, checkpoint every second (issue 6's workload 3)\n",
           f"Every tool watches one input directory. Files appear by atomic rename (staged under a hidden name, "
           f"`.burst-00.csv`, as hard links of the generated files, then renamed). Per run: a {st['warmup_rows']:,}-row "
           f"warm-up file first (the tool is *ready* when its rows are committed: start-up included); then the "
           f"**burst**: {st['files']} files × {rows:,} rows renamed at once (as fast as possible), rows/s = "
           f"{st['files'] * rows:,} / (last of those rows committed − first rename); then the **paced** files: "
           f"{st['paced']} × {rows:,} rows, one every {st['pace_s']:g} s + 1/{st['paced']} of the 1 s checkpoint interval "
           "(so that they arrive at every phase of the checkpoint cycle), for the latency of a file that arrives "
           "alone. *Latency* of a file = the moment all its rows are in committed output − its rename "
           "(*first rows*: the moment any of them is). The harness polls the committed output every 50 ms "
           "(Ferry: files published by the transactional LocalFile sink, `_ferry_tmp/` staging ignored; Spark: "
           "the files listed in `_spark_metadata/`; Flink: part files renamed from their hidden in-progress "
           "names) and attributes rows to input files by id. Then the tool is stopped (SIGTERM: Ferry's savepoint; "
           "the peers stop their queries) and its committed output is checked: count and sums of every column "
           "against all the rows dropped (" + ", ".join(f"{k} = {x}" for k, x in st["expected"].items()) + "). "
           "*Burst CPU s* = CPU time of the tool's process tree during the burst; *other load* = cores busy "
           "elsewhere on the machine during the burst. Ferry: `bench/jobs/stream_csv_to_parquet.conf` "
           "(STREAMING, `checkpoint.interval = 1000`, parallelism 2, LocalFile csv → LocalFile parquet, "
           "Snappy, `is_enable_transaction = true`), `--job-id bench --checkpoint-dir` a fresh directory; "
           "*ferry, checkpoint.on-idle* runs it with `-i on_idle=true`: also a checkpoint as soon as both readers "
           "have read every file they were given (Spark's micro-batch likewise commits when it has read its "
           "input, whatever the trigger interval).\n",
           "| tool | burst rows/s | min–max | burst s | burst CPU s | other load | burst latency median / max s "
           "| paced latency median / max s | paced first rows s | ready s | peak MB | check | runs |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for s in rep["results"]["stream"]:
        name = s["name"] + (f" ({s['note']})" if s.get("note") else "")
        if "burst_rows_per_s" not in s:
            out.append(f"| {name} | failed: {s.get('error', '')} |" + " |" * 11)
            continue
        check = s["verdict"] + (f" ({s['mismatch']})" if s.get("mismatch") else "")
        out.append(f"| {name} | {fmt_rate(s['burst_rows_per_s'])} | {fmt_rate(s['burst_rows_per_s_min'])}–"
                   f"{fmt_rate(s['burst_rows_per_s_max'])} | {s['burst_s']:.2f} | {s['burst_cpu_s']:.1f} | "
                   f"{s['burst_other_cores']:.2f} | {s['burst_latency_median']:.2f} / {s['burst_latency_max']:.2f} | "
                   f"{s['paced_latency_median']:.2f} / {s['paced_latency_max']:.2f} | "
                   f"{s['paced_first_visible_median']:.2f} | {s['ready_s']:.1f} | {s['peak_mb']:.0f} | {check} | "
                   f"{s['runs']} |")
    out.append("")
    return out


def markdown(rep) -> str:
    m = rep["machine"]
    res = rep["results"]
    v = ", ".join(f"{k} {x}" for k, x in rep["versions"].items())
    others = [s.get("other_cores", s.get("burst_other_cores")) for k in res if not k.startswith("_") for s in res[k]
              if ("other_cores" in s or "burst_other_cores" in s) and s["runs"] >= 3]
    busy = statistics.median(others) if others else 0.0
    out = [f"# Ferry benchmark — {rep['mode']} mode\n",
           f"- **When**: {rep['started']} (took {rep['elapsed_s']:.0f} s)",
           f"- **Command**: `{rep['command']}`",
           f"- **Machine**: {m['nproc']} cores ({m['cpu_model']}), {m['memory_gib']} GiB memory, Linux {m['kernel']}, Python {m['python']}",
           f"- **Load**: load average {rep['load_start'][0]:.2f} at the start, {rep['load_end'][0]:.2f} at the end. "
           "The machine is shared with engineers compiling Rust, so other processes were busy during some runs: "
           "the column *other load* is the CPU time (in cores) that everything else on the machine used while that tool ran "
           "(median over its runs). Compare figures only together with it. "
           f"Over this run the median was {busy:.2f} cores busy elsewhere out of {m['nproc']}: every tool had about "
           f"{max(0.0, m['nproc'] - busy):.1f} cores, so the figures compare the tools with each other, not with an idle machine.",
           f"- **Versions**: {v}"]
    batch = any(k in res for k in ("csv_to_parquet", "generate", "sql", "startup", "json_to_parquet", "patterns"))
    if batch:
        out.append(f"- **Data**: {rep['rows']:,} rows, {rep['csv_mb']:.0f} MB of CSV (bench/gen_data.py, deterministic); "
                   f"after `amount > 10`: {rep['expected']['rows']:,} rows.")
    out += [
           f"- **Rounds**: {rep['rounds']} for the fast tools, {rep['slow_rounds']} for Spark, Flink and Sling "
           f"(and for every tool of the streaming workload); interleaved, "
           "the order rotating each round. *spread* = (max − min) / median. *CPU s* = CPU time of the process tree "
           "(the figure least disturbed by other load); *cores used* = CPU time / wall time. "
           "Peak memory is the RSS of the whole process tree (Spark's and Flink's JVMs included)."]
    if batch:
        out.append("- **Checks**: every tool's output is read back with DuckDB and compared with the expected row count and sums of "
                   "every column (" + ", ".join(f"{k} = {x}" for k, x in rep["expected"].items()) + "); "
                   "rows/s counts the rows found in the output, not the tool's own report.")
    out.append("")
    out.append("## Targets\n\n| issue | target | measured | met |\n|---|---|---|---|")
    out += target_lines(rep) or ["| – | nothing measured | | |"]
    out.append("")
    if "csv_to_parquet" in res:
        out += ["## 1. CSV → Parquet (typed, filter `amount > 10`, Snappy)\n",
                "Ferry: `bench/jobs/csv_to_parquet.conf` (LocalFile csv → Sql → LocalFile parquet). "
                "References: `cat` of the input from the page cache and `dd` writing as many bytes as Ferry's output "
                "(rows/s as if the rows moved at that speed). *Ferry on Spark* (issue 4): the same job file through "
                "`ferry run --engine spark --master local[2]` (the driver `python -m ferry_spark`, Ferry's LocalFile "
                "source, Sql transform and LocalFile sink running in Spark's Python workers: the job is one chain, so each "
                "Spark task of the `ferry_source` Python data source reads, filters and writes its split itself and returns "
                "its prepared commit; `FERRY_SPARK_FUSE=0` would run the Sql as `mapInArrow` and the sink as an Arrow "
                "writer); its native module's build profile is in the versions above.\n",
                table(res["csv_to_parquet"])]
    if "generate" in res:
        out += ["## 2. Generation → blackhole (engine overhead)\n",
                f"Ferry: `bench/jobs/fake_blackhole.conf` (FakeSource, 6 columns, 2 readers → Blackhole). "
                "Peers build the same six columns from a row number and consume them (DuckDB and Polars aggregate "
                "every column so that nothing is optimised away; Spark writes to the `noop` format; Flink "
                "`datagen` → `blackhole`). Nothing is written, so rows are as each tool reports them "
                "(Ferry: its summary line).\n", table(res["generate"])]
    if "sql" in res:
        out += ["## 3. Sql transform cost (issue 5)\n",
                "`bench/jobs/fake_sql_blackhole.conf` against `bench/jobs/fake_blackhole.conf`, the same source; "
                "query: `select id, user_id, upper(event_type) as event_type, round(amount * 1.1, 2) as amount, ts, "
                "concat(note, '-x') as note from events where amount > 10`. rows/s counts rows read by the source.\n",
                table(res["sql"])]
    if "startup" in res:
        out += ["## 4. Start-up: a 10-row job, command to exit\n", table(res["startup"], startup=True)]
    if "stream" in res:
        out += stream_section(rep)
    if "json_to_parquet" in res:
        j = res.get("_meta", {}).get("json", {})
        out += ["## 6. JSON lines → Parquet (typed, Snappy, no transform; issue 13)\n",
                f"The first {j.get('rows', 0):,} rows of the CSV as JSON lines ({j.get('mb', 0):.0f} MB, one file, "
                "written by DuckDB: numbers as numbers, `ts` as its text `2024-02-24 14:11:08`). Ferry: "
                "`bench/jobs/json_to_parquet.conf` (LocalFile json with a schema → LocalFile parquet); with parallelism 2 "
                "the file is cut into line-aligned byte ranges shared by both readers. DuckDB `read_json(…, columns = …)`, "
                "Polars `scan_ndjson(schema = …)` with `str.to_datetime`. Checked against the sums of the same rows "
                "of the CSV (no filter).\n",
                table(res["json_to_parquet"])]
    if "patterns" in res:
        out += ["## 7. CSV → Parquet with `datetime_format` patterns (workload 1's job; issue 13)\n",
                "`bench/jobs/csv_to_parquet_pattern.conf` = workload 1's job with `datetime_format = \"${datetime_format}\"`. "
                "*ISO data*: the same CSV with `2024-02-24T14:11:08` timestamps. *no pattern*: the default "
                "`yyyy-MM-dd HH:mm:ss`, which Ferry reads with arrow-csv's own lenient parser; with any other pattern "
                "the column is read as text by arrow-csv and parsed by the compiled Java pattern "
                "(`ferry_api::javatime`).\n",
                table(res["patterns"])]
    if "jdbc_parquet" in res:
        j = res.get("_meta", {}).get("jdbc", {})
        out += ["## 8. Jdbc: PostgreSQL → Parquet, PostgreSQL → PostgreSQL, MariaDB → PostgreSQL (issue 14)\n",
                f"Source: `{j.get('table')}` in PostgreSQL ({j.get('rows', 0):,} rows, {j.get('size')} with its key), "
                "16 columns: int8 key, int4 ×2 (one with NULLs), int2, int8, numeric(12,2), float8, text, varchar(32), bool, "
                "date, timestamp, timestamptz, uuid, bytea (8 bytes), text with NULLs; every value a function of the id "
                "(`bench/sql/jdbc_source.sql`, created once and reused). Every output is checked against the same "
                "sums computed by SQL on the source (" + ", ".join(f"{k} = {x}" for k, x in j.get("expected", {}).items()) + "): "
                "Parquet read back with DuckDB (casting, so numeric written as text or uuid as a string is checked on "
                "its values), database targets with the same SQL on the target table.\n",
                "### (a) PostgreSQL → Snappy Parquet\n",
                "Ferry `bench/jobs/jdbc_to_parquet.conf` (Jdbc `table_path`, parallelism 2: the dynamic splitter on the "
                "key, each split a binary `COPY (SELECT …) TO STDOUT` decoded into Arrow → LocalFile parquet snappy). "
                "Reference: `psql \\copy (SELECT * FROM t) TO '/dev/null' (FORMAT binary)`.\n",
                table(res["jdbc_parquet"])]
        if res.get("jdbc_peak"):
            out += ["Peak memory on a bigger table (Ferry alone, once):\n", table(res["jdbc_peak"])]
        out += ["### (b) PostgreSQL → PostgreSQL\n",
                f"Into `{j.get('target')}` (`CREATE TABLE … (LIKE source)`: no key, no autovacuum), truncated before every run; "
                "Ferry `bench/jobs/jdbc_to_jdbc.conf` (Jdbc → Jdbc `generate_sink_sql`, default `batch_size` 1000), with "
                "INSERTs and with `use_copy_statement = true`; the peer is a `psql` binary COPY pipe "
                "(`psql -c \"\\copy (SELECT * FROM src) TO STDOUT (FORMAT binary)\" | psql -c \"\\copy target FROM STDIN "
                "(FORMAT binary)\"`).\n", table(res["jdbc_pg_pg"])]
        if res.get("jdbc_mariadb_pg"):
            out += ["### (c) MariaDB → PostgreSQL\n",
                    f"The same rows in MariaDB (`{j.get('mariadb_table')}`, loaded once with LOAD DATA from a text COPY; "
                    "bool as tinyint(1), timestamptz as datetime in UTC, uuid as char(36), bytea as varbinary) → the same "
                    "target, the same job file with a `jdbc:mysql://` source.\n", table(res["jdbc_mariadb_pg"])]
    else:
        out += ["## Not run here\n",
                "- **Jdbc** (PostgreSQL → Parquet / PostgreSQL, MariaDB → PostgreSQL): workload 8, `--only 8`; see "
                "`results/jdbc.md`.", ""]
    fails = [s for k in res if not k.startswith("_") for s in res[k] if s.get("failed")]
    if fails:
        out.append("## Failed runs\n")
        out += [f"- {s['name']}: {s['failed']} of {s['runs']} runs failed{(': ' + s['error']) if s.get('error') else ''}" for s in fails]
        out.append("")
    out.append("## Commands\n")
    for k in res:
        if k.startswith("_"):
            continue
        for s in res[k]:
            out.append(f"- {k} / {s['name']}: `{s['cmd']}`")
    out.append(f"\n![chart]({rep['mode']}.png)\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
