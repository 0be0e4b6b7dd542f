#!/bin/bash
# One device call: issue 33's sentinels (tools/sentinels_h100.py) and the preselected default selection
# (scripts/calibrate-step --device cuda default, what docs/explanation/budget.md times). Results under OUT.
#     bash tools/h100/sentinels_default.sh "$OUT"
set -u
OUT=${1:?usage: sentinels_default.sh OUT}
source tools/h100/env.sh /tmp/h100 || exit 3
mkdir -p "$OUT/sentinels"
say "sentinels"
timeout 420 python3 tools/sentinels_h100.py "$OUT/sentinels" 2>&1 | tail -40
say "sentinels rc ${PIPESTATUS[0]}"
say "default selection"
start=$(date +%s)
timeout 300 python3 scripts/calibrate-step --device cuda --workdir /tmp/h100/cal default > "$OUT/default.log" 2>&1
rc=$?
say "default rc $rc, $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
tail -30 "$OUT/default.log"
