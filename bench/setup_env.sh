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
  sling-linux-amd64 "duckdb-cli~=1.4.0" adbc-driver-postgresql
# Workload 8: DuckDB's postgres scanner from PyPI pins its DuckDB (1.5.5, older than the main
# venv's), so it gets its own venv. The wheel ships the extension as postgres.duckdb_extension,
# a name that does not match its entry point (postgres_scanner_...): copy it under its real name.
# The same venv's DuckDB CLI is the one Sling drives to write Parquet in workload 8; it
# autoloads json and httpfs, which are copied where DuckDB looks for installed extensions.
make_venv "$here/.venv-pgscan" .ready "duckdb==1.5.5" "duckdb-extension-postgres==1.5.5" \
  "duckdb-cli==1.5.5" "duckdb-extension-json==1.5.5" "duckdb-extension-httpfs==1.5.5" pyarrow
site="$("$here/.venv-pgscan/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$here/.venv-pgscan/ext" "$HOME/.duckdb/extensions/v1.5.5/linux_amd64"
[[ -f "$here/.venv-pgscan/ext/postgres_scanner.duckdb_extension" ]] ||
  cp "$site"/duckdb_extension_postgres/extensions/v1.5.5/postgres.duckdb_extension \
    "$here/.venv-pgscan/ext/postgres_scanner.duckdb_extension"
for e in json httpfs; do
  [[ -f "$HOME/.duckdb/extensions/v1.5.5/linux_amd64/$e.duckdb_extension" ]] ||
    cp "$site/duckdb_extension_$e/extensions/v1.5.5/$e.duckdb_extension" "$HOME/.duckdb/extensions/v1.5.5/linux_amd64/"
done
if [[ "${BENCH_SKIP_FLINK:-0}" != 1 ]]; then
  make_venv "$here/.venv-flink" .ready apache-flink
fi
