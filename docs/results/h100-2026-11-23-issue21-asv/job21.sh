#!/bin/bash
# Issue 21 on the H100: the cuda default selection, timed; then the compile axis against eager, the
# modern eager twins and the leak slopes, in real asv. Run from the carried checkout, in the background
# (setsid), so that each device call can return its $OUT before the call's limit (wait.sh collects).
set -u
W=/tmp/w; mkdir -p $W; T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
REPO=$PWD
cp -a asv.conf.json benchmarks src scripts pyproject.toml $W/  # isolated from the next call's re-sync
mkdir -p $W/wheels && cp .whl/*.whl $W/wheels/
cd $W
say "machine: $(nvidia-smi -L | head -1); $(nproc) cores; $(uptime)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site $W/wheels/*.whl || { say "wheel install failed"; touch $W/job.done; exit 3; }
export PYTHONPATH=$W/site:$W/src PATH=$W/site/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=$W/wheels PYTHONUNBUFFERED=1
python3 -c "import sys, torch, transformers, torchvision, triton; print(sys.version.split()[0], torch.__version__, transformers.__version__, torchvision.__version__, triton.__version__, torch.cuda.get_device_name(0))"
say "1. the default selection, timed as docs/budget.md times it"
s=$(date +%s)
python3 scripts/calibrate-step --device cuda --workdir /tmp/cal default > $W/default.txt 2>&1; rc=$?
echo "default: exit $rc, wall $(( $(date +%s) - s )) s" >> $W/default.txt; cat $W/default.txt
A=$(grep -o "[0-9a-f]\{40\}^!" /tmp/cal/asv.log | head -1 | cut -c1-40)
git -C /tmp/cal/timeline log --all --format='%H %s' > $W/timeline.txt
say "build A: $A"
full() {  # NAME REGEX: one asv run of the full sweep's combinations on build A, into the same results
  local s=$(date +%s)
  say "start $1"
  (cd /tmp/cal && MPSBENCH_FULL=1 MPSBENCH_DEVICES=cuda python3 -m asv run --machine calib-cuda --launch-method forkserver \
     --record-samples --show-stderr -b "$2" "$A^!" > $W/asv-$1.log 2>&1); local rc=$?
  echo "$1: exit $rc, wall $(( $(date +%s) - s )) s" | tee -a $W/walls.txt
}
full compile "^benchmark_compile\.Compiled(Training|Inference)\.(time_step|track_compile_seconds)\('cuda', '(llama_small|resnet50|vit_b_16)'\)"
full modern "^benchmark_modern\.Modern(Training|Inference)\.time_step\('cuda', ('(llama_small|clip_text)', 8|'vit_b_16', 32)\)"
full leak "^benchmark_patterns\.LeakPatterns\.track_growth\('cuda'"
if [ $(( $(date +%s) - T0 )) -lt 700 ]; then
  full compile-bert "^benchmark_compile\.Compiled(Training|Inference)\.(time_step|track_compile_seconds)\('cuda', 'bert_base'\)"
else say "compiled bert_base not run: $(( $(date +%s) - T0 )) s spent"; fi
say "done"
touch $W/job.done
