#!/usr/bin/env bash
# Run on the lent GPU machine (device tool), with .whl/ carried (see README "GPU results"):
#   - a collector (ett serve, SQLite) on the same machine;
#   - process-group init as the number of ranks grows: 1, 2, 4, 8 CPU ranks with gloo;
#   - the trainer on the GPU (NCCL) with an injected failure and a torchrun restart.
# Writes the collector's reports and the ranks' step logs under $OUT.
set -uo pipefail
FINAL="${OUT:-/tmp/ett-final}"
OUT=/tmp/ett-out  # bundled into $FINAL/device-results.tar.gz at the end (few files come back)
SITE=/tmp/site
rm -rf "$SITE" "$OUT" /tmp/gpu-failure /tmp/ett-device.db  # pip --target skips folders that exist
mkdir -p "$OUT" "$FINAL"
python -m pip install -q --no-deps --no-index --target "$SITE" .whl/*.whl 2>&1 | tail -2
export PYTHONPATH="$SITE:$PWD" TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 OMP_NUM_THREADS=1
python -c "import torch, torchrec, sqlalchemy, starlette, uvicorn, opentelemetry.exporter.otlp.proto.http.trace_exporter; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
DB="sqlite:////tmp/ett-device.db"
python -m cli serve --port 4318 --db "$DB" > "$OUT/collector.log" 2>&1 &
COLLECTOR=$!
sleep 4
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 ETT_MODEL=dlrm-device ETT_TEAM=device
for n in ${RANKS:-1 2 4 8}; do
  ETT_JOB_ID="pg-scaling-$n" timeout 180 torchrun --standalone --nproc-per-node "$n" \
    -m trainer.train --device cpu --sharding ddp --size tiny --steps 20 --no-compile \
    --ckpt-every-steps 0 --no-final-ckpt --no-progress --window-s 1 \
    --run-dir "$OUT/pg-scaling-$n" > "$OUT/pg-scaling-$n.log" 2>&1
  echo "ranks=$n rc=$?"
done
ETT_JOB_ID=gpu-failure timeout 300 torchrun --standalone --nproc-per-node "${GPUS:-1}" --max-restarts 1 \
  -m trainer.train --device cuda --size medium --rows 500000 --batch-size 2048 --steps 900 \
  --ckpt-every-steps 300 --ckpt-mode async-staged --no-compile --fail-at-step 750 \
  --fail-kind exception --fail-attempt 0 --window-s 2 --no-progress \
  --run-dir /tmp/gpu-failure > "$OUT/gpu-failure.log" 2>&1
echo "gpu run rc=$?"
mkdir -p "$OUT/gpu-failure"
cp /tmp/gpu-failure/steplog/*.jsonl "$OUT/gpu-failure/" 2>/dev/null
sleep 3
for job in gpu-failure $(for n in ${RANKS:-1 2 4 8}; do echo "pg-scaling-$n"; done); do
  python -m cli report "$job" --json --db "$DB" > "$OUT/$job.json" 2>&1
  python -m cli report "$job" --db "$DB" 2>&1 | head -40
done
curl -s "http://127.0.0.1:4318/api/v1/jobs/gpu-failure/segments" > "$OUT/gpu-failure-segments.json"
kill "$COLLECTOR"
tar -czf "$FINAL/device-results.tar.gz" -C "$OUT" .
ls -la "$FINAL"
