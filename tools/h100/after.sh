#!/bin/bash
# One device call after issue 31's changes: the cuda default selection (scripts/calibrate-step default, what
# docs/explanation/budget.md times), the A/A compare of tools/h100/loop.sh, and issue 33's energy parts (two processes).
#     PERCENT=N bash tools/h100/after.sh "$OUT"
set -u
OUT=${1:?usage: after.sh OUT}
E=/tmp/h100/energy
mkdir -p "$E" "$OUT"
source tools/h100/env.sh /tmp/h100 || exit 3
start=$(date +%s)
timeout 260 python3 scripts/calibrate-step --device cuda --workdir /tmp/h100/cal-after default > "$OUT/default.log" 2>&1
say "default: exit $?, $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
tail -3 "$OUT/default.log"
T_AA=${T_AA:-130} bash tools/h100/loop.sh /tmp/h100/loop-out aa 2>&1 | tail -4
cp /tmp/h100/loop-out/summary.md "$OUT/aa-summary.md"; cp /tmp/h100/loop-out/aa.log "$OUT/aa.log"
for run in 1 2; do
    start=$(date +%s)
    timeout 110 python3 tools/sentinels_h100.py "$E" --part energy --run $run --smi > "$E/run$run.log" 2>&1
    say "energy run $run: exit $?, $(( $(date +%s) - start )) s"
done
python3 -c "import sys; sys.path.insert(0, 'tools'); import sentinels_h100 as s; from pathlib import Path; s.summarize(Path('$E'))" 2>&1 | tail -3
cp "$E/summary.md" "$OUT/energy.md"; cp "$E"/energy-*.json "$OUT/"
grep -A14 "Joules per step" "$E/summary.md" 2>/dev/null
