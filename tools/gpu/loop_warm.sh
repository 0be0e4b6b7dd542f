#!/bin/bash
# The regression loop with warm parents on the lent GPU, beside the previous tree, in ONE device call (<= 10 min):
#     bash tools/gpu/loop_warm.sh OUT OLD_TREE        # from this tree's root; OLD_TREE: the tree before the change
# Builds (once, under $W): site-packages folders of links to the installed torch, one channel `loop`: n1..n5
# identical, s1..s3 with torch/nn/modules/linear.py's Linear.forward patched by tools/gpu/slow_linear.py to multiply
# PERCENT% more of the batch in inference (tuned first in one process: the smallest at or above TARGET, about 7%).
# Parts, in order, each timed with its own limit inside LIMIT seconds in all: both trees' asv environments made (not
# timed: the first command of a checkout makes it), then this tree's bisect n1 s3, compare n3 s2, the old tree's
# compare n3 s2, then A/A compares (n1 n2, n2 n3, ...) with this tree until the time is spent. Writes summary.md and
# the logs to OUT (at most 8 files). asv's virtualenvs also install build, pyproject_hooks, packaging, wheel and
# setuptools, which .whl lacks: put their py3-none-any wheels in whl-extra/ beside this script's tree (this machine's
# /opt/pypi/files holds them), and the script adds that folder to pip's find-links.
set -u
OUT=${1:?usage: loop_warm.sh OUT OLD_TREE}
OLD=$(cd "${2:?usage: loop_warm.sh OUT OLD_TREE}" && pwd)
NEW=$PWD
END=$(( $(date +%s) + ${LIMIT:-560} ))
W=${W:-/tmp/h47}
mkdir -p "$OUT" "$W"
if [ -z "${SMOKE:-}" ]; then
    source tools/gpu/env.sh "$W" || exit 3
    # what asv's virtualenvs install beyond .whl (pip's build and wheel tools), where this tree carries them
    [ -d whl-extra ] && export PIP_FIND_LINKS="$PIP_FIND_LINKS $PWD/whl-extra"
else  # SMOKE=1 DEVICE=cpu MODEL=mlp BATCH=32: the script's own steps on a machine without a GPU (python3: its venv's)
    T0=$(date +%s)
    say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
fi
export PYTORCH_NVML_BASED_CUDA_CHECK=1  # torch.cuda.is_available() in a warm parent, if any, leaves CUDA unstarted
DEVICE=${DEVICE:-cuda} MODEL=${MODEL:-bert_base} BATCH=${BATCH:-64} TARGET=${TARGET:-1.07}
BENCH="benchmark_models\\.Inference\\.time_step\\('$DEVICE', '$MODEL', $BATCH\\)"
FILES=(--manifest "$W/exam/manifest.json" --timeline "$W/exam/timeline")
SUMMARY=$OUT/summary.md
load() { cut -d' ' -f1-3 /proc/loadavg; }
note() { say "$*"; echo "- $(date -u +%H:%M:%S) $*" >> "$SUMMARY"; }
mps() { local tree=$1; shift; (cd "$tree" && PYTHONPATH=$W/site:$tree/src:$tree python3 -m mpsbench.cli "$@"); }
echo "# tools/gpu/loop_warm.sh ($(date -u +%FT%TZ))" >> "$SUMMARY"
note "machine: $(nvidia-smi -L 2>/dev/null | head -1), $(nproc) cores, load $(load); row $BENCH; $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"

make_builds() {  # idempotent: a second run on the same machine reuses them
    local site b i started=$(date +%s)
    if [ -s "$W/exam/made" ]; then
        note "builds: reused from $W/exam (PERCENT=$(cat "$W/exam/made"))"
        return 0
    fi
    site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))") || return 1
    timeout 150 python3 tools/gpu/slow_linear.py tune "$DEVICE" "$MODEL" "$BATCH" "$TARGET" > "$W/tune.log" 2>&1
    PERCENT=$(tail -1 "$W/tune.log")
    [[ "$PERCENT" =~ ^[0-9]+$ ]] || { note "tune failed: $(tail -3 "$W/tune.log" | tr '\n' ' ')"; return 1; }
    note "tuned (in one process): $(grep -E '^ *[0-9]+%' "$W/tune.log" | tr -s ' ' | paste -sd';'), chose $PERCENT%"
    rm -rf "$W/builds" "$W/exam"
    mkdir -p "$W/builds" "$W/exam"
    echo '{"schema": 1, "channels": []}' > "$W/exam/manifest.json"
    i=0
    for b in n1 n2 n3 n4 n5 s1 s2 s3; do
        i=$((i + 1))
        mkdir -p "$W/builds/$b"
        for entry in "$site"/*; do
            [ "$(basename "$entry")" = torch ] || ln -s "$entry" "$W/builds/$b/"
        done
        cp -as "$site/torch" "$W/builds/$b/torch" || return 1
        if [ "${b#s}" != "$b" ]; then
            rm "$W/builds/$b/torch/nn/modules/linear.py"
            cp "$site/torch/nn/modules/linear.py" "$W/builds/$b/torch/nn/modules/linear.py"
            python3 tools/gpu/slow_linear.py patch "$W/builds/$b/torch/nn/modules/linear.py" "$PERCENT" || return 1
        fi
        mps "$NEW" build add-existing "$W/builds/$b" --channel loop --id "$b" --date "2026-11-29T00:0$i:00Z" \
            "${FILES[@]}" >> "$OUT/setup.log" 2>&1 || return 1
    done
    echo "$PERCENT" > "$W/exam/made"
    note "builds: loop@n1..n5 identical, loop@s1..s3 with Linear.forward +$PERCENT% of the batch in inference, $(( $(date +%s) - started )) s"
}

warm_env() {  # a checkout's asv environment, made by its own code's discovery (what a first command would do)
    local tree=$1 started=$(date +%s)
    (cd "$tree" && PYTHONPATH=$W/site:$tree/src:$tree timeout 200 python3 - "$BENCH" "$W/exam" <<'PY'
import sys
from pathlib import Path
from mpsbench.regressions import fresh
bench, exam = sys.argv[1], Path(sys.argv[2])
args = fresh.Options(bench, 5, 20, exam / "manifest.json", exam / "timeline")
_, _, (good,) = fresh.name_builds(["loop@n1"], args.manifest, args.timeline)
with fresh.Session(args, [good]) as session:
    print(session.check_bench(good.commit))
PY
    ) >> "$OUT/setup.log" 2>&1
    note "asv environment of $tree: exit $?, $(( $(date +%s) - started )) s (not part of any timing below)"
}

part() {  # part NAME LIMIT TREE ARGS...: one timed command, its transcript in OUT/NAME.log, a line in the summary
    local name=$1 limit=$2 tree=$3 started rc before left
    shift 3
    left=$(( END - $(date +%s) ))
    [ "$left" -lt 40 ] && { note "$name: skipped, $left s left"; return 1; }
    [ "$limit" -gt "$left" ] && limit=$left
    before=$(load)
    started=$(date +%s)
    echo "\$ (cd $tree) mpsbench $*" >> "$OUT/$name.log"
    timeout "$limit" bash -c "$(declare -f mps); W=$W; mps \"\$@\"" _ "$tree" "$@" >> "$OUT/$name.log" 2>&1
    rc=$?
    note "$name ($tree): exit $rc$([ $rc = 124 ] && echo " (timed out at $limit s)"), wall $(( $(date +%s) - started )) s, load $before -> $(load): $(grep -E '^(verdict|first bad build|no regression|undecided|[0-9]+ processes in all)' "$OUT/$name.log" | tail -4 | tr '\n' ' ' | cut -c1-700)"
}

if make_builds; then
    warm_env "$NEW"
    warm_env "$OLD"
    part bisect 300 "$NEW" bisect loop@n1 loop@s3 -b "$BENCH" "${FILES[@]}" --log "$W/bisect-asv.log"
    if grep -q "cannot fork rounds" "$OUT/bisect.log"; then
        note "the warm parent refused to fork: every later part spawns (MPSBENCH_ROUND_PROCESS=spawn)"
        export MPSBENCH_ROUND_PROCESS=spawn
    fi
    part compare 150 "$NEW" compare loop@n3 loop@s2 -b "$BENCH" "${FILES[@]}" --log "$W/compare-asv.log"
    part compare-old 200 "$OLD" compare loop@n3 loop@s2 -b "$BENCH" "${FILES[@]}"
    pairs=("n1 n2" "n2 n3" "n3 n4" "n4 n5" "n1 n5" "n2 n4" "n1 n3" "n3 n5" "n2 n5" "n1 n4")
    for pair in "${pairs[@]}"; do
        set -- $pair
        part aa "100" "$NEW" compare "loop@$1" "loop@$2" -b "$BENCH" "${FILES[@]}" || break
    done
    # the samples' share: asv's timing loop (serve_build's "sampling") against each forked round and the command
    python3 - "$W/compare-asv.log" "$OUT/compare.log" >> "$SUMMARY" 2>&1 <<'PY'
import re, sys
log, out = open(sys.argv[1]).read(), open(sys.argv[2]).read()
rounds = [(float(a), float(b)) for a, b in re.findall(r"ended: status 0 in ([0-9.]+) s \(sampling ([0-9.]+) s\)", log)]
wall = re.search(r"done \(([0-9]+) s,", out)
if rounds:
    total, sampled = sum(r for r, _ in rounds), sum(s for _, s in rounds)
    print(f"- samples' share (compare n3 s2): {len(rounds)} rounds, sampling {sampled:.1f} s of {total:.1f} s in the"
          f" rounds' own processes ({sampled / total:.0%})" + (f", of the command's {wall.group(1)} s of rounds"
          f" ({sampled / float(wall.group(1)):.0%})" if wall else ""))
PY
    cp "$W/tune.log" "$OUT/tune.log" 2>/dev/null
    tail -c 4000000 "$W/compare-asv.log" > "$OUT/compare-asv.log" 2>/dev/null
else
    note "the builds could not be made: no part ran (see setup.log)"
fi
note "done, load $(load)"
