#!/usr/bin/env bash
# Creates the peers' virtual environments from PyPI (idempotent: a finished environment
# is kept; delete bench/.venv* to rebuild). PyFlink pins an old pyarrow, so it gets its own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3.11}"

make_venv() { # dir, marker, packages...
  local dir="$1" marker="$2"; shift 2
  # The marker holds the package list, so adding a package re-runs pip on the next run.
  if [[ -f "$dir/$marker" && "$(cat "$dir/$marker")" == "$*" ]]; then return 0; fi
  echo "bench: installing into $dir: $*" >&2
  [[ -x "$dir/bin/python" ]] || "$py" -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
  echo "$*" > "$dir/$marker"
}

# Main peers + the harness's own needs (psutil for memory, matplotlib for the chart).
# duckdb-cli 1.4 is the DuckDB program Sling drives to write Parquet (found via DUCKDB_PATH).
make_venv "$here/.venv" .ready duckdb polars pyarrow pyspark psutil matplotlib numpy \
  sling-linux-amd64 "duckdb-cli~=1.4.0"
if [[ "${BENCH_SKIP_FLINK:-0}" != 1 ]]; then
  make_venv "$here/.venv-flink" .ready apache-flink
fi
