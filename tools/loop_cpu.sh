#!/bin/bash
# The regression loop on this machine's cpu: eight builds of the environment's own torch (site-packages folders of
# links, nothing installed), the 5th to 8th with torch.nn.functional.layer_norm also normalizing PERCENT% of its
# rows first (a real change in torch's own code, about 1.3x on the medium layer_norm row), then a bisect over them.
#     bash tools/loop_cpu.sh OUT [bisect|aa]...      # from the tree's root, with its .venv
# W (default /tmp/loop-cpu) holds the builds, a HOME and MPSBENCH_CACHE of their own; delete it afterwards.
set -u
source tools/linked_site.sh  # run from the tree's root
OUT=${1:?usage: loop_cpu.sh OUT [bisect|aa]...}
shift
PARTS=${*:-bisect}
W=${W:-/tmp/loop-cpu} PY=${PY:-$PWD/.venv/bin/python} PERCENT=${PERCENT:-30}
BENCH="MemoryBoundOps\\.time_forward\\('cpu', 'layer_norm', 'float32', 'medium'\\)"
mkdir -p "$OUT" "$W/home"
export HOME=$W/home MPSBENCH_CACHE=$W/cache PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
FILES=(--manifest "$W/exam/manifest.json" --timeline "$W/exam/timeline")
SUMMARY=$OUT/summary.md
say() { echo "[$(date -u +%H:%M:%S)] $*"; echo "- $(date -u +%H:%M:%S) $*" >> "$SUMMARY"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
ORIGINAL='    return torch.layer_norm(
        input, normalized_shape, weight, bias, eps, torch.backends.cudnn.enabled
    )'
say "machine: $(nproc) cores, load $(load), row $BENCH"
if [ ! -s "$W/exam/made" ]; then
    site=$($PY -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
    rm -rf "$W/builds" "$W/exam"
    mkdir -p "$W/builds" "$W/exam"
    echo '{"schema": 1, "channels": []}' > "$W/exam/manifest.json"
    i=0
    for b in n1 n2 n3 n4 s1 s2 s3 s4; do
        i=$((i + 1))
        linked_site "$site" "$W/builds/$b" || exit 1
        if [ "${b#s}" != "$b" ]; then
            rm "$W/builds/$b/torch/nn/functional.py"
            $PY - "$site/torch/nn/functional.py" "$W/builds/$b/torch/nn/functional.py" "$PERCENT" "$ORIGINAL" <<'PY' || exit 1
import sys
source, target, percent, original = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3]), sys.argv[4]
assert source.count(original) == 1, "layer_norm's return is not torch's own"
extra = ("    torch.layer_norm(input.detach()[: max(1, input.shape[0] * %d // 100)], normalized_shape, weight, bias, eps,"
         " torch.backends.cudnn.enabled)\n" % percent)
open(target, "w").write(source.replace(original, extra + original))
PY
        fi
        $PY -m mpsbench.cli build add-existing "$W/builds/$b" --channel cpu --id "$b" --date "2026-11-29T00:0$i:00Z" \
            "${FILES[@]}" >> "$OUT/setup.log" 2>&1 || exit 1
    done
    echo "$PERCENT" > "$W/exam/made"
    say "builds: cpu@n1..n4 identical, cpu@s1..s4 with F.layer_norm normalizing $PERCENT% of its rows first"
fi
for part in $PARTS; do
    case $part in
        bisect) args=(bisect cpu@n1 cpu@s4) ;;
        aa) args=(compare cpu@n1 cpu@n3) ;;
        *) say "unknown part $part"; continue ;;
    esac
    before=$(load) started=$(date +%s)
    echo "\$ mpsbench ${args[*]} -b $BENCH" >> "$OUT/$part.log"
    $PY -m mpsbench.cli "${args[@]}" -b "$BENCH" "${FILES[@]}" --log "$W/$part-asv.log" >> "$OUT/$part.log" 2>&1
    rc=$?
    say "$part: exit $rc, wall $(( $(date +%s) - started )) s, load $before -> $(load): $(grep -E '^(verdict|first bad build|no regression|undecided|[0-9]+ processes in all)' "$OUT/$part.log" | tail -3 | tr '\n' ' ' | cut -c1-600)"
done
