#!/usr/bin/env bash
# The one command of the GPU runs (device tool; carry .whl/, see README "GPU results"):
#   - a collector (ett serve, SQLite) on the same machine, waited for on /healthz;
#   - process-group init as the number of ranks grows: $RANKS CPU ranks with gloo;
#   - on $GPUS GPUs with NCCL, each fault kind with a torchrun restart and a resume:
#     exception, sigkill, sigterm (preemption), hang (ended by the trainer's step watchdog), and
#     exception with --failure-teardown destroy (the teardown that hung: the library's exit
#     watchdog ends it);
#   - checkpoint blocking per mode (sync, async; async-staged comes from the fault runs);
#   - scripts/device_check.py: the collector's figures against the ranks' step logs.
# Test it on a CPU: NO_WHEELS=1 PATH=.venv/bin:$PATH DEVICE=cpu SHARDING=ddp GPUS=2 RANKS="1 2" STEPS=60 SIZE=tiny bash scripts/device_run.sh
# Writes the reports, checks and step logs to $OUT/device-results.tar.gz.
set -uo pipefail
FINAL="${OUT:-/tmp/ett-final}"
RESULTS=/tmp/ett-out  # bundled at the end (few files come back)
SITE=/tmp/site
GPUS="${GPUS:-2}" RANKS="${RANKS-1 2 4 8}" DEVICE="${DEVICE:-cuda}"
STEPS="${STEPS:-600}" SIZE="${SIZE:-medium}" SHARDING="${SHARDING:-auto}" WINDOW=2
KINDS="${KINDS-exception sigkill sigterm hang destroy}"
MODES="${MODES-sync async}"  # RANKS, KINDS, MODES: set empty to skip
rm -rf "$RESULTS" /tmp/ett-runs /tmp/ett-device.db
mkdir -p "$RESULTS" "$FINAL"
if [ -z "${NO_WHEELS:-}" ] && ls .whl/*.whl > /dev/null 2>&1; then
  rm -rf "$SITE"  # pip --target skips folders that exist
  python -m pip install -q --no-deps --no-index --target "$SITE" .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH="$SITE:$PWD"
else
  export PYTHONPATH="$PWD"
fi
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 OMP_NUM_THREADS=1
python -c "import torch, torchrec, sqlalchemy, starlette, uvicorn, opentelemetry.exporter.otlp.proto.http.trace_exporter; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
DB="sqlite:////tmp/ett-device.db"
PORT="${PORT:-4318}"
python -m ett_cli serve --port "$PORT" --db "$DB" > "$RESULTS/collector.log" 2>&1 &
COLLECTOR=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/healthz" || { echo "collector did not start"; tail "$RESULTS/collector.log"; exit 4; }
echo
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PORT" ETT_MODEL=dlrm-device ETT_TEAM=device
JOBS=()
t() { date +%s; }

for n in $RANKS; do
  job="pg-scaling-$n"; JOBS+=("$job"); t0=$(t)
  ETT_JOB_ID="$job" timeout 180 torchrun --standalone --nproc-per-node "$n" \
    -m trainer.train --device cpu --sharding ddp --size tiny --steps 20 --no-compile \
    --ckpt-every-steps 0 --no-final-ckpt --no-progress --window-s 1 \
    --run-dir "/tmp/ett-runs/$job" > "$RESULTS/$job.log" 2>&1
  echo "$job rc=$? $(( $(t) - t0 )) s"
done

GPU_ARGS=(--device "$DEVICE" --sharding "$SHARDING" --size "$SIZE" --batch-size 2048 --steps "$STEPS" --no-compile
  --window-s "$WINDOW" --no-progress)
[ "$SIZE" = medium ] && GPU_ARGS+=(--rows 500000)
EVERY=$(( STEPS / 3 ))
FAIL_AT=$(( STEPS * 5 / 6 ))
for kind in $KINDS; do
  job="gpu-$kind"; JOBS+=("$job"); t0=$(t)
  extra=(--fail-kind "$kind")
  case "$kind" in
    hang) extra+=(--watchdog-s 5) ;;
    destroy) extra=(--fail-kind exception --failure-teardown destroy) ;;
  esac
  ETT_JOB_ID="$job" ETT_EXIT_TIMEOUT_S=5 timeout 150 torchrun --standalone --nproc-per-node "$GPUS" \
    --max-restarts 1 -m trainer.train "${GPU_ARGS[@]}" --ckpt-every-steps "$EVERY" \
    --ckpt-mode async-staged --fail-at-step "$FAIL_AT" --fail-rank 0 --fail-attempt 0 \
    "${extra[@]}" --run-dir "/tmp/ett-runs/$job" > "$RESULTS/$job.log" 2>&1
  echo "$job rc=$? $(( $(t) - t0 )) s; $(grep -o 'exitcode: [-0-9]*' "$RESULTS/$job.log" | sort | uniq -c | tr '\n' ' ')"
done
for mode in $MODES; do
  job="gpu-ckpt-$mode"; JOBS+=("$job"); t0=$(t)
  ETT_JOB_ID="$job" timeout 180 torchrun --standalone --nproc-per-node "$GPUS" \
    -m trainer.train "${GPU_ARGS[@]}" --steps $(( STEPS / 2 )) --ckpt-every-steps "$EVERY" \
    --ckpt-mode "$mode" --run-dir "/tmp/ett-runs/$job" > "$RESULTS/$job.log" 2>&1
  echo "$job rc=$? $(( $(t) - t0 )) s"
done

sleep 3  # the last spans' recompute settles (1 s after a burst)
for job in "${JOBS[@]}"; do
  mkdir -p "$RESULTS/$job"
  cp /tmp/ett-runs/"$job"/steplog/*.jsonl "$RESULTS/$job/" 2>/dev/null
  python -m ett_cli report "$job" --json --db "$DB" > "$RESULTS/$job.json" 2>&1
  curl -s "http://127.0.0.1:$PORT/api/v1/jobs/$job/segments" > "$RESULTS/$job-segments.json"
  echo "== $job"
  python scripts/device_check.py "$RESULTS/$job.json" "$RESULTS/$job" --window-s "$WINDOW" \
    | tee "$RESULTS/$job-check.json"
done
kill "$COLLECTOR"
tar -czf "$FINAL/device-results.tar.gz" -C "$RESULTS" .
ls -la "$FINAL"
