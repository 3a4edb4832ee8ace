#!/usr/bin/env bash
# Integration test of the deployments, as an operator runs them, all on 127.0.0.1:
# PostgreSQL (the Debian package) -> a Prefect server on it -> a process worker ->
# `drafts deploy` -> `drafts trigger --wait` of search, survey and validate -> the same
# search on a local Dask scheduler with two workers. Everything it starts is stopped on
# exit. Needs drafts-ops installed (the [test] extra brings prefect-dask) and PostgreSQL's
# binaries (apt-get install postgresql); run as root (PostgreSQL runs as user postgres) or
# as a user that may run initdb.
#
#   bash deploy/integration.sh [WORKDIR]     # exit 0: every step passed
set -euo pipefail

WORK=$(realpath -m "${1:-$(mktemp -d /tmp/drafts-integration.XXXXXX)}")
mkdir -p "$WORK"
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$PG_BIN" ] || { echo "integration: PostgreSQL is not installed (apt-get install postgresql)"; exit 77; }
# PostgreSQL's files live in their own directory under /tmp, which the postgres user can
# reach (a caller's work directory may be private).
PGROOT=$(mktemp -d /tmp/drafts-pg.XXXXXX)
chmod 755 "$PGROOT"
PG_PORT=${PG_PORT:-54329}
API_PORT=${API_PORT:-4299}
DASK_PORT=${DASK_PORT:-8799}
export PREFECT_HOME="$WORK/prefect-home" PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
export PREFECT_API_URL="http://127.0.0.1:$API_PORT/api"
pids=()
step() { echo "== integration: $*"; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  as_pg "$PG_BIN/pg_ctl" -D "$PGROOT/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$PGROOT"
}
trap cleanup EXIT
wait_http() {  # URL, seconds
  for _ in $(seq 1 "$2"); do
    python - "$1" <<'PY' && return 0
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except Exception:
    sys.exit(1)
PY
    sleep 1
  done
  echo "integration: $1 did not answer in $2 s"; return 1
}

step "PostgreSQL on 127.0.0.1:$PG_PORT"
mkdir -p "$PGROOT/data" "$PGROOT/sock"
if [ "$(id -u)" = 0 ]; then chown postgres "$PGROOT" "$PGROOT/data" "$PGROOT/sock"; fi
as_pg "$PG_BIN/initdb" -D "$PGROOT/data" -U postgres -A trust >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$PGROOT/data" -l "$PGROOT/log" -w \
  -o "-p $PG_PORT -k $PGROOT/sock -c listen_addresses=127.0.0.1" start >/dev/null
psql_pg() { as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qc "$1"; }
psql_pg "CREATE ROLE prefect LOGIN PASSWORD 'prefect'"
psql_pg "CREATE DATABASE prefect OWNER prefect"

step "Prefect server on it, $PREFECT_API_URL"
PREFECT_API_DATABASE_CONNECTION_URL="postgresql+asyncpg://prefect:prefect@127.0.0.1:$PG_PORT/prefect" \
  prefect server start --host 127.0.0.1 --port "$API_PORT" >"$WORK/server.log" 2>&1 &
pids+=($!)
wait_http "$PREFECT_API_URL/health" 240

step "deployments and a process worker"
mkdir -p "$WORK/in" "$WORK/obs"
drafts simulate "$WORK/obs/obs.fil" --nchans 64 --duration 8 --dm 150 --snr 25 --quiet
cp "$WORK/obs/obs.fil" "$WORK/in/a.fil"
touch -d '-5 minutes' "$WORK/in/a.fil"
drafts deploy --set survey.incoming="$WORK/in" --set survey.out_dir="$WORK/survey"
prefect worker start --pool drafts-process >"$WORK/worker.log" 2>&1 &
pids+=($!)

step "search through the worker"
drafts trigger drafts-search/search --param path="$WORK/obs/obs.fil" \
  --param out_dir="$WORK/search" --param options.dm_max=300 --param options.write_plots=false \
  --wait --timeout 600
test -f "$WORK/search/DONE.json" && test -f "$WORK/search/report.html"

step "survey through the worker"
drafts trigger drafts-survey/survey --param incoming="$WORK/in" --param out_dir="$WORK/survey" \
  --param options.settle_s=0 --param search.dm_max=300 --wait --timeout 600
python - "$WORK/survey/survey_summary.json" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
# done by this run, or by the cron schedule's own run a moment before (both are fine)
assert summary["ledger"] == {"done": 1} and not summary["failed"], summary
PY

step "validate through the worker"
drafts trigger drafts-validate/validate --param files="[\"$WORK/obs/obs.fil\"]" \
  --param out_dir="$WORK/validate" --param dm_max=300 --wait --timeout 600
test -f "$WORK/validate/validation.html"

step "search on a local Dask scheduler with two workers"
dask scheduler --host 127.0.0.1 --port "$DASK_PORT" --dashboard-address :0 --no-show \
  >"$WORK/dask-scheduler.log" 2>&1 &
pids+=($!)
sleep 3
for i in 1 2; do
  dask worker "tcp://127.0.0.1:$DASK_PORT" --nthreads 1 --host 127.0.0.1 \
    --dashboard-address :0 >"$WORK/dask-worker-$i.log" 2>&1 &
  pids+=($!)
done
sleep 3
drafts search "$WORK/obs/obs.fil" --out "$WORK/dask" --dm-max 300 --no-write-plots \
  --no-progress --task-runner dask --dask-address "tcp://127.0.0.1:$DASK_PORT"
python - "$WORK/dask/perf.json" "$WORK/search/candidates.csv" "$WORK/dask/candidates.csv" <<'PY'
import json, sys
perf = json.load(open(sys.argv[1]))
assert "Dask" in perf["run"]["task_runner"], perf["run"]
same = [open(p).read().splitlines()[:4] for p in sys.argv[2:]]
assert len(same[0]) > 1 and same[0] == same[1], same
PY

step "all steps passed ($WORK)"
