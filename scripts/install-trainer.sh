#!/usr/bin/env bash
# Install the trainer's stack (torch, TorchRec, fbgemm CPU kernels) into the venv at $1's python.
# torch is pinned to the CPU build on this machine's disk: never ask pip for an unpinned torch.
set -euo pipefail
PY="${1:-.venv/bin/python}"
REQ="$(dirname "$0")/../trainer/requirements.txt"
[ -s "$REQ" ] || { echo "no trainer requirements yet"; exit 0; }
PIP="$PY -m pip --disable-pip-version-check -q"
# Lines marked "# no-deps" are installed with --no-deps (torchrec asks for the CUDA fbgemm-gpu).
grep -v '^\s*#' "$REQ" | grep -v 'no-deps' | sed 's/#.*//' | xargs -r $PIP install
grep 'no-deps' "$REQ" | grep -v '^\s*#' | sed 's/#.*//' | xargs -r $PIP install --no-deps
