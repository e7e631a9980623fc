#!/usr/bin/env bash
# Profiles one Ferry job of the benchmark with perf (sampling, call graphs) and prints the
# functions that dominate: self time first, then time including callees.
#   bench/profile.sh csv [ROWS]     # workload 1 on bench/data/events_ROWS.csv (default 10M)
#   bench/profile.sh sql [ROWS]     # workload 3 (FakeSource -> Sql -> Blackhole)
#   bench/profile.sh fake [ROWS]    # workload 2 (FakeSource -> Blackhole)
#   bench/profile.sh jdbc [ROWS]    # workload 8 (a): ferry_bench.jdbc_ROWS (made by --only 8) -> Parquet
# Needs `perf` (Debian: linux-perf) and a release binary with symbols (the workspace's
# release profile keeps debug = 1): FERRY_BIN, else $CARGO_TARGET_DIR/release/ferry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
what="${1:-csv}"; rows="${2:-10000000}"
ferry="${FERRY_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/ferry/target-release}/release/ferry}"
out="$here/data/profile"; mkdir -p "$out"
case "$what" in
  csv)
    csv="$here/data/events_${rows}.csv"
    [[ -f "$csv" ]] || { echo "no $csv: run bench/run first (--rows $rows)" >&2; exit 1; }
    rm -rf "$out/parquet"
    job=("$here/jobs/csv_to_parquet.conf" -i "input=$csv" -i "output=$out/parquet" -i parallelism=2) ;;
  sql)  job=("$here/jobs/fake_sql_blackhole.conf" -i "rows_per_reader=$((rows / 2))" -i parallelism=2) ;;
  fake) job=("$here/jobs/fake_blackhole.conf" -i "rows_per_reader=$((rows / 2))" -i parallelism=2) ;;
  jdbc)
    [[ $# -ge 2 ]] || rows=2000000
    rm -rf "$out/parquet"
    job=("$here/jobs/jdbc_to_parquet.conf" -i "table_path=test.ferry_bench.jdbc_${rows}" -i "output=$out/parquet" -i parallelism=2) ;;
  *) echo "usage: $0 csv|sql|fake|jdbc [ROWS]" >&2; exit 2 ;;
esac
perf record -F 299 -g --call-graph dwarf,8192 -o "$out/perf.data" -- "$ferry" run "${job[@]}" >&2
echo "## self time (top 40)"
perf report -i "$out/perf.data" --no-children --stdio --sort symbol --percent-limit 0.7 -g none 2>/dev/null \
  | grep -v '^#' | grep -v '^$' | head -40
echo; echo "## by thread"
perf report -i "$out/perf.data" --no-children --stdio --sort comm -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12
echo; echo "## including callees (top 60)"
perf report -i "$out/perf.data" --children --stdio --sort symbol --percent-limit 3 -g none 2>/dev/null \
  | grep -v '^#' | grep -v '^$' | head -60
