#!/usr/bin/env python3
"""A/B of MySQL-CDC's snapshot between Ferry binaries, each against the Jdbc bulk read.

    bench/cdc_ab.py [--rounds 5] [--rows 1000000] before=/path/to/ferry after=/path/to/ferry

Runs bench/cdc.py's MariaDB round (the Jdbc source's bulk read of `ferry_bench.cdc_snap`
into Blackhole, then MySQL-CDC's snapshot of it, parallelism 2) for each binary in turn,
interleaved round by round so that both meet the same machine, and prints per-round and
median rates. Every run has its own checkpoint directory (a shared one would let the second
binary resume the first one's snapshot).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cdc  # noqa: E402
import harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("binaries", nargs="+", help="name=path of a ferry binary")
    a = ap.parse_args()
    bins = dict(b.split("=", 1) for b in a.binaries)
    subprocess.run(["psql", *cdc.CONN, "-v", f"rows={a.rows}", "-v", "tbl=cdc_snap",
                    "-f", str(cdc.HERE / "sql/jdbc_source.sql")], check=True, capture_output=True)
    harness.ensure_mariadb_table("ferry_bench.cdc_snap", a.rows)
    res = {k: [] for k in bins}
    runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for rnd in range(a.rounds):
            for name, b in bins.items():
                os.environ["FERRY_BIN"] = b
                r = cdc.mysql_round(d, 1000 + runs)
                runs += 1
                res[name].append(r)
                print(f"round {rnd + 1} {name}: Jdbc {a.rows / r['my_jdbc_s']:,.0f} rows/s, "
                      f"MySQL-CDC {a.rows / r['my_cdc_s']:,.0f} rows/s, "
                      f"ratio {r['my_jdbc_s'] / r['my_cdc_s']:.3f}", flush=True)
    for name, rs in res.items():
        j = statistics.median(r["my_jdbc_s"] for r in rs)
        c = statistics.median(r["my_cdc_s"] for r in rs)
        ratios = sorted(r["my_jdbc_s"] / r["my_cdc_s"] for r in rs)
        print(f"{name}: medians Jdbc {a.rows / j:,.0f} rows/s, MySQL-CDC {a.rows / c:,.0f} rows/s "
              f"({j / c:.3f}×); per-round ratios {[round(x, 3) for x in ratios]}")


if __name__ == "__main__":
    main()
