#!/bin/bash
# This stop's GPU check: the preselected default run of one build through asv (every family, the per_kind
# classes included), then the ops probe from its new home (tools/ops_table.py via scripts/ops-table).
set -u
W=/tmp/h28
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p $W/wheels $OUT
cp .whl/*.whl $W/wheels/
say "machine: $(nvidia-smi -L | head -1); $(nproc) cores; commit $(cat .carry-h100/commit 2>/dev/null || echo '?')"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site $W/wheels/*.whl || { say "wheel install failed"; exit 3; }
export PYTHONPATH=$W/site:$PWD/src:$PWD PATH=$W/site/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=$W/wheels PYTHONUNBUFFERED=1
say "ops-table (float32, medium)"
PYTHON=python3 OUT=$OUT timeout 120 scripts/ops-table --device cuda --dtypes float32 --sizes medium 2>&1 | tail -30
say "rc ${PIPESTATUS[0]}"
say "calibrate-step default"
timeout ${1:-420} python3 scripts/calibrate-step --device cuda --workdir $W/cal default 2>&1 | tail -140
say "rc ${PIPESTATUS[0]}"
cp -r $W/cal/results $OUT/ 2>/dev/null; cp $W/cal/asv.log $OUT/ 2>/dev/null
say "done"
