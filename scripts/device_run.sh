#!/usr/bin/env bash
# The one command of the device runs, for any number of ranks N (GPUS=N; carry .whl/, see
# docs/gpu-results.md):
#   - a collector (ett serve, SQLite) on the same machine, waited for on /healthz;
#   - start-up as the number of ranks grows ($RANKS, each <= N on GPUs): pg_init and TTS;
#   - on N ranks, each fault kind on one rank ($FAIL_RANK, default the last) with a torchrun
#     restart and a resume: exception, sigkill, sigterm (preemption), hang (ended by the
#     trainer's step watchdog), and exception with --failure-teardown destroy (the teardown that
#     hung: the library's exit watchdog ends it);
#   - checkpoint blocking per mode ($MODES) at each of $CKPT_RANKS ranks (default 2 and N), the
#     same state per rank (the ddp path holds every table on every rank);
#   - one rank slowed on purpose ($SLOW_RANK sleeps $SLOW_S more in each forward; every rank
#     works $WORK_S a step): the straggler the collector names (GET .../performance);
#   - scripts/device_check.py: the collector's figures against the ranks' step logs.
# On GPUs a run that needs more ranks than GPUs is skipped ("skip" in the output): NCCL puts
# one rank on a GPU. Set RANKS, KINDS, MODES, CKPT_RANKS or STRAGGLER empty to skip that part;
# DEADLINE_S=S starts no run after S seconds (the rest is reported as skipped).
# Test it on CPU ranks with gloo (8 ranks on 2 busy cores take about 10 minutes):
#   NO_WHEELS=1 PATH=.venv/bin:$PATH DEVICE=cpu SHARDING=ddp GPUS=8 RANKS="1 2 4 8" STEPS=60 \
#     SIZE=tiny JOB_TIMEOUT=300 bash scripts/device_run.sh
# Writes the reports, checks and step logs to $OUT/device-results.tar.gz and a summary table
# (scripts/device_summary.py) to $OUT/summary.md.
set -uo pipefail
FINAL="${OUT:-/tmp/ett-final}"
RESULTS=/tmp/ett-out  # bundled at the end (few files come back)
SITE=/tmp/site
GPUS="${GPUS:-2}" RANKS="${RANKS-1 2 4 8}" DEVICE="${DEVICE:-cuda}"
STEPS="${STEPS:-600}" SIZE="${SIZE:-medium}" SHARDING="${SHARDING:-auto}" WINDOW=2
KINDS="${KINDS-exception sigkill sigterm hang destroy}"
MODES="${MODES-sync async async-staged}"
CKPT_RANKS="${CKPT_RANKS-2 $GPUS}" STRAGGLER="${STRAGGLER-1}"
FAIL_RANK="${FAIL_RANK:-$((GPUS - 1))}" SLOW_RANK="${SLOW_RANK:-$((GPUS / 2))}"
JOB_TIMEOUT="${JOB_TIMEOUT:-180}" STRAGGLER_STEPS="${STRAGGLER_STEPS:-300}"
DEADLINE_S="${DEADLINE_S:-0}"  # > 0: start no run after this many seconds (a short lease)
if [ "$DEVICE" = cpu ]; then WORK_S="${WORK_S:-0.05}" SLOW_S="${SLOW_S:-0.05}"
else WORK_S="${WORK_S:-0}" SLOW_S="${SLOW_S:-0.02}"; fi
rm -rf "$RESULTS" /tmp/ett-runs /tmp/ett-device.db
mkdir -p "$RESULTS" "$FINAL"
if [ -z "${NO_WHEELS:-}" ] && ls .whl/*.whl > /dev/null 2>&1; then
  rm -rf "$SITE"  # pip --target skips folders that exist
  python -m pip install -q --no-deps --no-index --no-compile --target "$SITE" .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH="$SITE:$PWD/src:$PWD"
else
  export PYTHONPATH="$PWD/src:$PWD"
fi
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 OMP_NUM_THREADS=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python -c "import torch, torchrec, sqlalchemy, starlette, uvicorn, ett, ett_collector, opentelemetry.exporter.otlp.proto.http.trace_exporter; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())" || exit 3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
DB="sqlite:////tmp/ett-device.db"
PORT="${PORT:-4318}" URL="http://127.0.0.1:${PORT:-4318}"
ETT_WINDOW_S="$WINDOW" python -m ett_cli serve --port "$PORT" --db "$DB" > "$RESULTS/collector.log" 2>&1 &
COLLECTOR=$!
for _ in $(seq 100); do
  curl -sf "$URL/healthz" > /dev/null && break
  sleep 0.2
done
curl -sf "$URL/healthz" || { echo "collector did not start"; tail "$RESULTS/collector.log"; exit 4; }
echo
export OTEL_EXPORTER_OTLP_ENDPOINT="$URL" ETT_MODEL=dlrm-device ETT_TEAM=device
JOBS=()
declare -A SLOWED  # job -> the rank slowed on purpose
t() { date +%s; }
BEGAN=$(t)
fits() {  # fits N: can N ranks run here? (one GPU a rank)
  [ "$DEVICE" = cpu ] || [ "$1" -le "$GPUS" ] || { echo "skip: $2 needs $1 GPUs"; return 1; }
}
launch() {  # launch JOB N [torchrun args] -- [trainer args]: one torchrun of N ranks
  local job="$1" n="$2"; shift 2
  local tr=()
  while [ "$1" != -- ]; do tr+=("$1"); shift; done
  shift
  if [ "$DEADLINE_S" -gt 0 ] && [ $(( $(t) - BEGAN )) -ge "$DEADLINE_S" ]; then
    echo "skip: $job (past DEADLINE_S=$DEADLINE_S)"; return
  fi
  JOBS+=("$job"); local t0; t0=$(t)
  ETT_JOB_ID="$job" ETT_EXIT_TIMEOUT_S=5 timeout "$JOB_TIMEOUT" torchrun --standalone \
    --nproc-per-node "$n" "${tr[@]}" -m trainer.train "$@" --run-dir "/tmp/ett-runs/$job" \
    > "$RESULTS/$job.log" 2>&1
  echo "$job rc=$? $(( $(t) - t0 )) s; $(grep -o 'exitcode: [-0-9]*' "$RESULTS/$job.log" | sort | uniq -c | tr '\n' ' ')"
}

for n in $RANKS; do
  fits "$n" "startup-$n" || continue
  launch "startup-$n" "$n" -- --device "$DEVICE" --sharding "$SHARDING" --size tiny --steps 20 \
    --no-compile --ckpt-every-steps 0 --no-final-ckpt --no-progress --window-s 1
done

ARGS=(--device "$DEVICE" --sharding "$SHARDING" --size "$SIZE" --batch-size 2048 --no-compile
  --window-s "$WINDOW" --no-progress)
[ "$SIZE" = medium ] && ARGS+=(--rows 500000)
EVERY=$(( STEPS / 3 )) FAIL_AT=$(( STEPS * 5 / 6 ))
for kind in $KINDS; do
  extra=(--fail-kind "$kind")
  case "$kind" in
    hang) extra+=(--watchdog-s 5) ;;
    destroy) extra=(--fail-kind exception --failure-teardown destroy) ;;
  esac
  launch "fault-$kind-$GPUS" "$GPUS" --max-restarts 1 -- "${ARGS[@]}" --steps "$STEPS" \
    --ckpt-every-steps "$EVERY" --ckpt-mode async-staged --fail-at-step "$FAIL_AT" \
    --fail-rank "$FAIL_RANK" --fail-attempt 0 "${extra[@]}"
done
for n in $(printf '%s\n' $CKPT_RANKS | sort -nu); do
  [ -n "$MODES" ] && { fits "$n" "ckpt-*-$n" || continue; }
  for mode in $MODES; do
    launch "ckpt-$mode-$n" "$n" -- "${ARGS[@]}" --steps $(( STEPS / 2 )) \
      --ckpt-every-steps "$EVERY" --ckpt-mode "$mode"
  done
done
if [ -n "$STRAGGLER" ] && [ "$GPUS" -ge 2 ]; then
  job="straggler-$GPUS"; SLOWED[$job]="$SLOW_RANK"
  launch "$job" "$GPUS" -- "${ARGS[@]}" --steps "$STRAGGLER_STEPS" --ckpt-every-steps 0 \
    --no-final-ckpt --step-delay-s "$WORK_S" --slow-rank "$SLOW_RANK" --slow-s "$SLOW_S"
elif [ -n "$STRAGGLER" ]; then
  echo "skip: straggler-$GPUS needs 2 ranks or more"
fi

sleep 3  # the last spans' recompute settles (1 s after a burst)
for job in "${JOBS[@]}"; do
  mkdir -p "$RESULTS/$job"
  cp /tmp/ett-runs/"$job"/steplog/*.jsonl "$RESULTS/$job/" 2>/dev/null
  python -m ett_cli report "$job" --json --db "$DB" > "$RESULTS/$job.json" 2>&1
  curl -s "$URL/api/v1/jobs/$job/segments" > "$RESULTS/$job-segments.json"
  perf=()
  if [ -n "${SLOWED[$job]:-}" ]; then
    curl -s "$URL/api/v1/jobs/$job/performance?buckets=20" > "$RESULTS/$job-performance.json"
    perf=(--performance "$RESULTS/$job-performance.json" --slow-rank "${SLOWED[$job]}")
  fi
  python scripts/device_check.py "$RESULTS/$job.json" "$RESULTS/$job" --window-s "$WINDOW" \
    "${perf[@]}" > "$RESULTS/$job-check.json"
done
kill "$COLLECTOR"
python scripts/device_summary.py "$RESULTS" | tee "$FINAL/summary.md"
tar -czf "$FINAL/device-results.tar.gz" -C "$RESULTS" .
ls -la "$FINAL"
