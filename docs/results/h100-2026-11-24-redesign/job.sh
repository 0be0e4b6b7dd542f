#!/bin/bash
# Issue 18's GPU check of the redesigned suite: part1 = the preselected default run of build A and
# asv continuous A2/B (the calibration's own copy of the suite injects 5% into resnet50); part2 = fidelity.
set -u
W=/tmp/h25
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p $W/wheels $OUT
cp .whl/*.whl $W/wheels/
say "machine: $(nvidia-smi -L | head -1); $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site $W/wheels/*.whl || { say "wheel install failed"; exit 3; }
export PYTHONPATH=$W/site:$PWD/src:$PWD PATH=$W/site/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=$W/wheels PYTHONUNBUFFERED=1
case "$1" in
part1)
  say "calibrate-step default ab"
  timeout ${2:-540} python3 scripts/calibrate-step --device cuda --workdir $W/cal default ab 2>&1 | tail -150
  say "rc ${PIPESTATUS[0]}"
  ;;
part2)
  say "calibrate fidelity"
  timeout ${2:-540} python3 scripts/calibrate --device cuda --phases fidelity --workdir $W/cal --out $OUT/cal 2>&1 | grep -v "^\[" | tail -80
  say "rc ${PIPESTATUS[0]}"
  ;;
esac
mkdir -p $OUT/results
cp -r $W/cal/results $OUT/ 2>/dev/null; cp $W/cal/asv.log $W/cal/continuous-*.txt $OUT/ 2>/dev/null
say "done"
