#!/bin/bash
# One device call for issues 31 and 33: the cuda default selection timed with asv's log (where its seconds go),
# then tools/energy_probe.py in four processes (nvidia-smi beside the last two). At most 8 files under OUT, except
# affinity's (issue 33: six processes of the energy part, every other one pinned to core PIN_CORE by taskset).
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
            cp /tmp/h100/cal-energy/asv.log "$OUT/${TAG:-}asv.log"
            tar -czf "$OUT/${TAG:-}results.tgz" -C /tmp/h100/cal-energy results ;;
        ops)  # where an op row's process goes: cuda's start, then each op's preparation and 20 samples
            timeout 120 python3 tools/h100/opprobe.py > "$OUT/${TAG:-}opprobe.json" 2> "$OUT/${TAG:-}opprobe.err"
            say "ops probe: exit $?, $(( $(date +%s) - start )) s" ;;
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
        affinity)  # is a host-paced row's pace the process's core? 6 processes, every other one pinned to one core
            A=/tmp/h100/affinity; mkdir -p "$A"
            nvidia-smi topo -m > "$OUT/topo.txt" 2>&1; lscpu > "$OUT/lscpu.txt" 2>&1
            core=${PIN_CORE:-2}
            for run in 1 2 3 4 5 6; do
                start=$(date +%s); pin=()
                if [ $((run % 2)) -eq 0 ]; then pin=(taskset -c "$core"); fi
                timeout 120 "${pin[@]}" python3 tools/sentinels_h100.py "$A/run$run" --part energy --run $run \
                    --models "${PROBE_MODELS:-mlp,lenet5}" > "$OUT/affinity-$run.log" 2>&1
                say "affinity run $run (${pin[*]:-unpinned}): exit $?, $(( $(date +%s) - start )) s, load $(load)"
            done ;;
        pace)  # is a host-paced step's pace its launching thread's core? that thread on each core, then free processes
            P=/tmp/h100/pace; mkdir -p "$P"   # eleven files: one tarball under OUT
            lscpu > "$P/lscpu.txt" 2>&1
            timeout 200 python3 tools/pace_probe.py "$P/pace-cores.json" --mode cores > "$P/pace.log" 2>&1
            say "pace cores: exit $?, $(( $(date +%s) - start )) s, load $(load)"
            for run in 1 2 3 4 5 6 7 8; do
                start=$(date +%s); how=()
                if [ "$run" -gt 6 ]; then how=(env PYTHONHASHSEED=0 setarch "$(uname -m)" -R); fi
                timeout 60 "${how[@]}" python3 tools/pace_probe.py "$P/pace-free-$run.json" --mode free >> "$P/pace.log" 2>&1
                say "pace free $run (${how[*]:-as is}): exit $?, $(( $(date +%s) - start )) s, load $(load)"
            done
            tar -czf "$OUT/pace.tgz" -C "$P" . ;;
        *) say "unknown part $part (default, ops, probe, energy, affinity, pace)" ;;
    esac
done
