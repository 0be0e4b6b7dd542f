#!/bin/bash
# One device call for issues 31 and 33: the cuda default selection timed with asv's log (where its seconds go),
# then tools/energy_probe.py in four processes (nvidia-smi beside the last two). At most 8 files under OUT.
#     PARTS="default probe" bash tools/h100/energy.sh "$OUT"
#     cd OTHER_TREE && TAG=base- PARTS=default bash /path/to/tools/h100/energy.sh "$OUT"   # another commit's default
set -u
OUT=${1:?usage: energy.sh OUT}
PARTS=${PARTS:-default probe}
mkdir -p "$OUT"
source tools/h100/env.sh /tmp/h100 || exit 3
load() { cut -d' ' -f1-3 /proc/loadavg; }
for part in $PARTS; do
    start=$(date +%s)
    case $part in
        default)
            rm -rf /tmp/h100/cal-energy
            timeout "${T_DEFAULT:-280}" python3 scripts/calibrate-step --device cuda --workdir /tmp/h100/cal-energy default \
                > "$OUT/${TAG:-}default.log" 2>&1
            say "${TAG:-}default: exit $?, $(( $(date +%s) - start )) s, load $(load)"
            cp /tmp/h100/cal-energy/asv.log "$OUT/${TAG:-}asv.log" ;;
        probe)  # four processes: a and b alone, c and d with nvidia-smi sampling beside them
            for run in a b c d; do
                start=$(date +%s)
                timeout 150 python3 tools/energy_probe.py "$OUT/probe-$run.json" --models "${PROBE_MODELS:-mlp,lenet5}" \
                    $([ $run = c ] || [ $run = d ] && echo --smi) >> "$OUT/probe.log" 2>&1
                say "probe $run: exit $?, $(( $(date +%s) - start )) s, load $(load)"
            done ;;
        energy)  # the sentinels' energy part as the rows measure it, two processes alike (nvidia-smi beside both)
            E=/tmp/h100/energy; mkdir -p "$E"
            for run in 1 2; do
                start=$(date +%s)
                timeout 200 python3 tools/sentinels_h100.py "$E" --part energy --run $run --smi \
                    > "$E/run$run.log" 2>&1
                say "energy run $run: exit $?, $(( $(date +%s) - start )) s, load $(load)"
            done
            python3 -c "import sys; sys.path.insert(0, 'tools'); import sentinels_h100 as s; from pathlib import Path; s.summarize(Path('$E'))"
            cp "$E/summary.md" "$OUT/energy.md"; cp "$E"/energy-*.json "$OUT/"
            grep -A14 "Joules per step" "$E/summary.md" ;;
        *) say "unknown part $part (default, probe, energy)" ;;
    esac
done
