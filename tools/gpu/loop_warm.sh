#!/bin/bash
# The regression loop with warm parents on the lent GPU, one row and one real change in torch's own code, in ONE
# device call (<= 10 min):
#     PATCH=linear MODEL=bert_base BATCH=64 bash tools/gpu/loop_warm.sh OUT [PART...]   # from this tree's root
# PATCH (tools/gpu/slow_module.py's PATCHES: linear, conv2d) slows MODEL's inference at BATCH on DEVICE (cuda) by
# the smallest PERCENT of the batch that reaches TARGET (default 1.07) in one process, or by PERCENT if given.
# Builds (once per PATCH, MODEL and BATCH, under $W): site-packages folders of links to the installed torch,
# channel `loop`: n1..n5 identical, s1..s3 with the patched module file. Several rows may share one OUT (one call):
# each part's log is named for its row, with at most 8 files coming back (tar the rest). PARTS, in order, each timed with its own limit inside LIMIT seconds in all:
#   breakdown   tools/process_breakdown.py's forked round, term by term (one warm parent, 3 children)
#   bisect      bisect n1 s3
#   compare     compare n3 s2
#   old         compare n3 s2 with the tree OLD (the tree before a change)
#   aa[:N]      A/A compares n1 n2, n2 n3, ... (N pairs, default 10) until the time is spent
# Default: bisect compare aa. Writes summary.md and the logs to OUT. asv's virtualenvs also
# install build, pyproject_hooks, packaging, wheel and setuptools: .whl must hold them; what it lacks goes in
# whl-extra/ (tools/gpu/env.sh).
set -u
source tools/linked_site.sh  # run from the tree's root
OUT=${1:?usage: loop_warm.sh OUT [PART...]}
shift
PARTS=${*:-bisect compare aa}
NEW=$PWD
END=$(( $(date +%s) + ${LIMIT:-560} ))
W=${W:-/tmp/loop-gpu}
mkdir -p "$OUT" "$W"
if [ -z "${SMOKE:-}" ]; then
    source tools/gpu/env.sh "$W" || exit 3
else  # SMOKE=1 DEVICE=cpu MODEL=lenet5 BATCH=32: the script's own steps on a machine without a GPU (python3: its venv's)
    T0=$(date +%s)
    say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
fi
export PYTORCH_NVML_BASED_CUDA_CHECK=1  # torch.cuda.is_available() in a warm parent, if any, leaves CUDA unstarted
PATCH=${PATCH:-linear} DEVICE=${DEVICE:-cuda} MODEL=${MODEL:-bert_base} BATCH=${BATCH:-64} TARGET=${TARGET:-1.07}
BENCH="benchmark_models\\.Inference\\.time_step\\('$DEVICE', '$MODEL', $BATCH\\)"
EXAM=$W/$PATCH-$DEVICE-$MODEL-$BATCH
FILES=(--manifest "$EXAM/manifest.json" --timeline "$EXAM/timeline")
SUMMARY=$OUT/summary.md
TAG=$MODEL-$BATCH  # the logs' names: one call may run several rows into one OUT
load() { cut -d' ' -f1-3 /proc/loadavg; }
note() { say "$*"; echo "- $(date -u +%H:%M:%S) $*" >> "$SUMMARY"; }
mps() { local tree=$1; shift; (cd "$tree" && PYTHONPATH=$W/site:$tree/src:$tree python3 -m mpsbench.cli "$@"); }
echo "# tools/gpu/loop_warm.sh $PARTS ($(date -u +%FT%TZ), commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")})" >> "$SUMMARY"
note "machine: $(nvidia-smi -L 2>/dev/null | head -1), $(nproc) cores, load $(load); row $BENCH; patch $PATCH; $(python3 -c 'import torch, torchvision, transformers; print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)')"

make_builds() {  # idempotent: a second run on the same machine reuses them
    local site b i file started=$(date +%s)
    if [ -s "$EXAM/made" ]; then
        note "builds: reused from $EXAM (PERCENT=$(cat "$EXAM/made"))"
        return 0
    fi
    site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))") || return 1
    file=torch/$(python3 tools/gpu/slow_module.py path "$PATCH") || return 1
    if [ -n "${PERCENT:-}" ]; then  # chosen by an earlier tune
        echo "$PERCENT" > "$EXAM.tune"
    else
        timeout 150 python3 tools/gpu/slow_module.py tune "$PATCH" "$DEVICE" "$MODEL" "$BATCH" "$TARGET" > "$EXAM.tune" 2>&1
    fi
    PERCENT=$(tail -1 "$EXAM.tune")
    [[ "$PERCENT" =~ ^[0-9]+$ ]] || { note "tune failed: $(tail -3 "$EXAM.tune" | tr '\n' ' ')"; return 1; }
    note "tuned (in one process): $(grep -E '^ *[0-9]+%' "$EXAM.tune" | tr -s ' ' | paste -sd';'), chose $PERCENT%"
    rm -rf "$EXAM"
    mkdir -p "$EXAM/builds"
    echo '{"schema": 1, "channels": []}' > "$EXAM/manifest.json"
    i=0
    for b in n1 n2 n3 n4 n5 s1 s2 s3; do
        i=$((i + 1))
        linked_site "$site" "$EXAM/builds/$b" || return 1
        if [ "${b#s}" != "$b" ]; then
            rm "$EXAM/builds/$b/$file"
            cp "$site/$file" "$EXAM/builds/$b/$file"
            python3 tools/gpu/slow_module.py patch "$PATCH" "$EXAM/builds/$b/$file" "$PERCENT" || return 1
        fi
        mps "$NEW" build add-existing "$EXAM/builds/$b" --channel loop --id "$b" --date "2026-11-29T00:0$i:00Z" \
            "${FILES[@]}" >> "$OUT/setup.log" 2>&1 || return 1
    done
    echo "$PERCENT" > "$EXAM/made"
    note "builds: loop@n1..n5 identical, loop@s1..s3 with $file's $PATCH +$PERCENT% of the batch in inference, $(( $(date +%s) - started )) s"
}

warm_env() {  # a checkout's asv environment, made by its own code's discovery (what a first command would do)
    local tree=$1 started=$(date +%s)
    (cd "$tree" && PYTHONPATH=$W/site:$tree/src:$tree timeout 200 python3 - "$BENCH" "$EXAM" <<'PY'
import dataclasses
import inspect
import sys
from pathlib import Path
from mpsbench.regressions import fresh
bench, exam = sys.argv[1], Path(sys.argv[2])
files = {"manifest": exam / "manifest.json", "timeline": exam / "timeline"}
if "suite" in {field.name for field in dataclasses.fields(fresh.Options)}:
    # newer trees: the Options carry the suite; name_builds names the builds and the chosen combination
    from mpsbench.context import Suite
    suite = Suite(manifest_path=files["manifest"], timeline_path=files["timeline"])
    args = fresh.Options(bench=bench, suite=suite, min_rounds=5, max_rounds=20)
    (good,), chosen = fresh.name_builds(["loop@n1"], args)
    given = [chosen]
else:
    args = fresh.Options(  # by keyword: the fields' order differs between trees
        bench=bench, **files, min_rounds=5, max_rounds=20
    )
    # name_builds takes the Options in newer trees, the manifest and timeline paths in older ones
    if "args" in inspect.signature(fresh.name_builds).parameters:
        named = fresh.name_builds(["loop@n1"], args)
    else:
        named = fresh.name_builds(["loop@n1"], args.manifest, args.timeline)
    (good,), given = named[2], named[3:]  # some trees also name the chosen combination
with fresh.Session(args, [good], *given) as session:
    print(session.check_bench(good.commit))
PY
    ) >> "$OUT/setup.log" 2>&1
    note "asv environment of $tree: exit $?, $(( $(date +%s) - started )) s (not part of any timing below)"
}

part() {  # part NAME LIMIT TREE ARGS...: one timed command, its transcript in OUT/NAME.log, a line in the summary
    local name=$1 limit=$2 tree=$3 started rc before left log=$OUT/$1-$TAG.log seen
    shift 3
    left=$(( END - $(date +%s) ))
    [ "$left" -lt 40 ] && { note "$name: skipped, $left s left"; return 1; }
    [ "$limit" -gt "$left" ] && limit=$left
    before=$(load)
    started=$(date +%s)
    echo "\$ (cd $tree) mpsbench $*" >> "$log"
    seen=$(wc -l < "$log")
    timeout "$limit" bash -c "$(declare -f mps); W=$W; mps \"\$@\"" _ "$tree" "$@" >> "$log" 2>&1
    rc=$?
    note "$name $* ($tree): exit $rc$([ $rc = 124 ] && echo " (timed out at $limit s)"), wall $(( $(date +%s) - started )) s, load $before -> $(load): $(tail -n +$((seen + 1)) "$log" | grep -E '^(verdict|first bad build|no regression|undecided|[0-9]+ processes in all)' | tail -4 | tr '\n' ' ' | cut -c1-700)"
}

share() {  # the samples' share of each forked round: asv's timing loop against the command-to-reply time
    [ -f "$1" ] || return 0
    python3 - "$1" >> "$SUMMARY" 2>&1 <<'PY'
import re, sys
log = open(sys.argv[1]).read()
replies = [float(s) for s in re.findall(r"replied in ([0-9.]+) s", log)]
rounds = [(float(a), float(b)) for a, b in re.findall(r"ended: status 0 in ([0-9.]+) s \(sampling ([0-9.]+) s\)", log)]
if rounds:
    sampled, inside = sum(s for _, s in rounds), sum(r for r, _ in rounds)
    print(f"- samples' share ({sys.argv[1].rsplit('/', 1)[-1]}): {len(rounds)} rounds, sampling {sampled:.1f} s of"
          f" {inside:.1f} s in the rounds' own processes ({sampled / inside:.0%})"
          + (f", of {sum(replies):.1f} s command to reply ({sampled / sum(replies):.0%})" if replies else ""))
PY
}

if make_builds; then
    warm_env "$NEW"
    [ -n "${OLD:-}" ] && warm_env "$OLD"
    for p in $PARTS; do
        case $p in
            breakdown)
                started=$(date +%s)
                (cd "$NEW" && timeout 200 python3 tools/process_breakdown.py loop@n1 -b "$BENCH" "${FILES[@]}" \
                    --mode fork --repeat 3) >> "$OUT/breakdown-$TAG.log" 2>&1
                note "breakdown: exit $?, $(( $(date +%s) - started )) s (breakdown-$TAG.log)" ;;
            bisect) part bisect 300 "$NEW" bisect loop@n1 loop@s3 -b "$BENCH" "${FILES[@]}" --log "$W/bisect-$TAG.asv"
                share "$W/bisect-$TAG.asv" ;;
            compare) part compare 150 "$NEW" compare loop@n3 loop@s2 -b "$BENCH" "${FILES[@]}" --log "$W/compare-$TAG.asv"
                share "$W/compare-$TAG.asv" ;;
            old) part old 200 "$OLD" compare loop@n3 loop@s2 -b "$BENCH" "${FILES[@]}" ;;
            aa|aa:*)
                pairs=("n1 n2" "n2 n3" "n3 n4" "n4 n5" "n1 n5" "n2 n4" "n1 n3" "n3 n5" "n2 n5" "n1 n4")
                n=${p#aa}; n=${n#:}
                for pair in "${pairs[@]:0:${n:-10}}"; do
                    set -- $pair
                    part aa 100 "$NEW" compare "loop@$1" "loop@$2" -b "$BENCH" "${FILES[@]}" --log "$W/aa-$TAG.asv" || break
                done
                share "$W/aa-$TAG.asv" ;;
            *) note "unknown part $p" ;;
        esac
    done
    cp "$EXAM.tune" "$OUT/tune-$TAG.log" 2>/dev/null
else
    note "the builds could not be made: no part ran (see setup.log)"
fi
note "done, load $(load)"
