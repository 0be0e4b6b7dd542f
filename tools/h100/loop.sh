#!/bin/bash
# Issue 31's regression loop on the lent H100, timed, in two device calls of at most 9 minutes each:
#     bash tools/h100/loop.sh "$OUT" bisect                   # call 1: the 8 builds, then bisect over them
#     PERCENT=N bash tools/h100/loop.sh "$OUT" compare aa fidelity   # call 2 (N: call 1's, in its summary.md)
# The builds (made once per machine, under $W): site-packages folders of links to the installed torch (docs/explanation/the-rule.md,
# "On the H100"), on a manifest and timeline of their own, one channel `loop`: n1..n5 identical, s1..s3 with
# torch/nn/modules/conv.py's Conv2d.forward patched by tools/h100/slow_conv.py to convolve PERCENT% more of the
# batch when training. PERCENT is tuned first in one process (the smallest at or above TARGET, about 7%) unless given.
# Parts: bisect (n1..s3), compare (n5 against s1: the ~6-7% change), aa (n1 against n2), fidelity (scripts/calibrate's
# hand loop against asv on the row). Each part has its own timeout and logs; a part that fails is noted and the next
# runs. Writes at most 8 files to OUT: summary.md, setup.log, PART.log for each part, asv.log, calibration.md.
# A smoke run on a cpu (no GPU, no carried wheels; the lead's device minutes are not spent on a typo):
#     DEVICE=cpu MODEL=lenet5 BATCH=32 ROUNDS="--min-rounds 4 --max-rounds 4" bash tools/h100/loop.sh /tmp/x compare
set -u
OUT=${1:?usage: loop.sh OUT [bisect] [compare] [aa] [fidelity]}
shift
PARTS=${*:-bisect compare aa fidelity}
DEVICE=${DEVICE:-cuda} MODEL=${MODEL:-resnet50} BATCH=${BATCH:-128} TARGET=${TARGET:-1.065} ROUNDS=${ROUNDS:-}
W=${W:-/tmp/h100}
mkdir -p "$OUT" "$W"
OUT=$(cd "$OUT" && pwd)
if [ "$DEVICE" = cuda ]; then
    source tools/h100/env.sh "$W" || exit 3  # defines say(), PYTHONPATH and the offline pip
    PY=python3
else
    T0=$(date +%s)
    say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
    PY=${PY:-$PWD/.venv/bin/python}
    export PYTHONUNBUFFERED=1
fi
SUMMARY=$OUT/summary.md
load() { cut -d' ' -f1-3 /proc/loadavg; }
note() { say "$*"; echo "- $(date -u +%H:%M:%S) $*" >> "$SUMMARY"; }
BENCH="benchmark_models\\.Training\\.time_step\\('$DEVICE', '$MODEL', $BATCH\\)"
FILES=(--manifest "$W/exam/manifest.json" --timeline "$W/exam/timeline")
echo "# tools/h100/loop.sh $PARTS ($(date -u +%FT%TZ))" >> "$SUMMARY"
note "machine: $(nvidia-smi -L 2>/dev/null | head -1 || true) $(nproc) cores, load $(load), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), row $BENCH"

make_builds() {  # idempotent: a machine kept warm between the two calls reuses them
    if [ -s "$W/exam/made" ]; then
        PERCENT=$(cat "$W/exam/made")
        note "builds: reused from $W/exam (PERCENT=$PERCENT)"
        return 0
    fi
    local site started b i
    started=$(date +%s)
    site=$($PY -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))") || return 1
    if [ -z "${PERCENT:-}" ]; then
        timeout "${T_TUNE:-120}" $PY tools/h100/slow_conv.py tune "$DEVICE" "$MODEL" "$BATCH" "$TARGET" > "$W/tune.log" 2>&1
        cat "$W/tune.log" >> "$OUT/setup.log"
        PERCENT=$(tail -1 "$W/tune.log")
        [[ "$PERCENT" =~ ^[0-9]+$ ]] || { note "tune failed: $(tail -3 "$W/tune.log" | tr '\n' ' ')"; return 1; }
        note "tuned: $(grep -E '^ *[0-9]+%' "$W/tune.log" | tr -s ' ' | paste -sd';')"
    fi
    rm -rf "$W/builds" "$W/exam"
    mkdir -p "$W/builds" "$W/exam"
    echo '{"schema": 1, "channels": []}' > "$W/exam/manifest.json"  # a manifest of their own, empty
    i=0
    for b in n1 n2 n3 n4 n5 s1 s2 s3; do
        i=$((i + 1))
        mkdir -p "$W/builds/$b"
        for entry in "$site"/*; do
            [ "$(basename "$entry")" = torch ] || ln -s "$entry" "$W/builds/$b/"
        done
        cp -as "$site/torch" "$W/builds/$b/torch" || return 1
        if [ "${b#s}" != "$b" ]; then
            rm "$W/builds/$b/torch/nn/modules/conv.py"
            cp "$site/torch/nn/modules/conv.py" "$W/builds/$b/torch/nn/modules/conv.py"
            $PY tools/h100/slow_conv.py patch "$W/builds/$b/torch/nn/modules/conv.py" "$PERCENT" || return 1
        fi
        "$PY" -m mpsbench.cli build add-existing "$W/builds/$b" --channel loop --id "$b" \
            --date "2026-11-27T00:0$i:00Z" "${FILES[@]}" >> "$OUT/setup.log" 2>&1 || return 1
    done
    echo "$PERCENT" > "$W/exam/made"
    note "builds: loop@n1..n5 identical, loop@s1..s3 with Conv2d.forward +$PERCENT% of the batch when training, $(( $(date +%s) - started )) s"
}

part() {  # part NAME TIMEOUT COMMAND...: one timed part, its transcript in OUT/NAME.log and a line in the summary
    local name=$1 limit=$2 started rc before
    shift 2
    before=$(load)
    started=$(date +%s)
    say "$name: $*"
    echo "\$ $*" > "$OUT/$name.log"
    timeout "$limit" "$@" >> "$OUT/$name.log" 2>&1
    rc=$?
    note "$name: exit $rc$([ $rc = 124 ] && echo " (timed out at $limit s)"), wall $(( $(date +%s) - started )) s, load $before -> $(load): $(grep -E '^(verdict|first bad build|no regression|undecided|[0-9]+ processes in all)|fidelity:' "$OUT/$name.log" | tr '\n' ' ' | cut -c1-600)"
    echo "\`$*\`" >> "$SUMMARY"
}

MPS=("$PY" -m mpsbench.cli)
if make_builds; then
    for p in $PARTS; do
        case $p in
            bisect) part bisect "${T_BISECT:-430}" "${MPS[@]}" bisect loop@n1 loop@s3 -b "$BENCH" "${FILES[@]}" $ROUNDS --log "$OUT/asv.log" ;;
            compare) part compare "${T_COMPARE:-170}" "${MPS[@]}" compare loop@n5 loop@s1 -b "$BENCH" "${FILES[@]}" $ROUNDS --log "$OUT/asv.log" ;;
            aa) part aa "${T_AA:-150}" "${MPS[@]}" compare loop@n1 loop@n2 -b "$BENCH" "${FILES[@]}" $ROUNDS --log "$OUT/asv.log" ;;
            fidelity)
                part fidelity "${T_FIDELITY:-170}" $PY scripts/calibrate --device "$DEVICE" --phases fidelity \
                    --select "$BENCH" --workdir "$W/cal" --out "$W/cal-out"
                cp "$W/cal-out/calibration.md" "$OUT/calibration.md" 2>/dev/null || note "fidelity: no calibration.md" ;;
            *) note "unknown part $p (bisect, compare, aa, fidelity)" ;;
        esac
    done
else
    note "the builds could not be made: no part ran (see setup.log)"
fi
note "done, load $(load)"
