#!/usr/bin/env bash
# Install the trainer's stack into the venv whose python is $1, in the order that works here:
# torch 2.13.0 (a CPU build from the local disk: never ask pip for an unpinned torch), then
# torchrec's own needs, then torchrec and fbgemm-gpu-cpu WITHOUT their dependencies (torchrec's
# metadata asks for the CUDA fbgemm-gpu; fbgemm must match torch's minor version). The CPU
# kernels (fbgemm-gpu-cpu) stand in for fbgemm-gpu, so pip's conflict check, which would print
# "ERROR: ... torchrec 1.8.0 requires fbgemm-gpu, which is not installed", is turned off for that
# one install; `pip check` still reports it, as expected.
set -euo pipefail
PY="${1:-.venv/bin/python}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PIP="$PY -m pip --disable-pip-version-check -q"
$PIP install "torch==2.13.0"
$PIP install -r "$ROOT/trainer/requirements.txt"
$PIP install --no-deps --no-warn-conflicts "torchrec==1.8.0" "fbgemm-gpu-cpu==1.8.0"
$PY -c "import torch, fbgemm_gpu, torchrec" || { echo "torch/torchrec failed to import" >&2; exit 1; }
echo "trainer stack: torch $($PY -c 'import torch; print(torch.__version__)'), torchrec 1.8.0" \
  "with the CPU fbgemm kernels (fbgemm-gpu-cpu; torchrec's metadata names the CUDA fbgemm-gpu)"
