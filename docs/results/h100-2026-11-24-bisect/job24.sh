#!/bin/bash
# Issue 23's GPU trial under the committed rule (2026-11-24): bisect among four builds, then the A/A compare,
# both with the default rounds. Run from the repository root copy on the H100, in the background (setsid).
set -u
W=/tmp/h23
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
REPO=$PWD
mkdir -p $W/suite $W/wheels
cp -a asv.conf.json benchmarks src scripts pyproject.toml $W/suite/   # isolated from later re-syncs of the checkout
cp .whl/*.whl $W/wheels/
say "machine: $(nvidia-smi -L | head -1); $(nproc) cores; $(uptime)"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site $W/wheels/*.whl || { say "wheel install failed"; touch $W/job.done; exit 3; }
SP=/opt/torch/.venv/lib/python3.12/site-packages; [ -f $SP/torch/version.py ] || SP=$(python3 -c "import torch, pathlib; print(pathlib.Path(torch.__file__).resolve().parents[1])")
say "site-packages $SP"
# four builds: every entry a symlink to the real site-packages, torch/ a tree of symlinks (cp -as)
for b in n1 n2 s1 s2; do
  mkdir -p $W/builds/$b
  for e in "$SP"/*; do n=$(basename "$e"); [ "$n" = torch ] || ln -s "$e" "$W/builds/$b/$n"; done
  cp -as "$SP/torch" "$W/builds/$b/torch"
done
say "folders made"
cd $W/suite
B="benchmark_models\.Training\.time_step\('cuda', 'bert_base', 64\)"
export PYTHONUNBUFFERED=1 MPSBENCH_DEVICES=cuda
if [ -z "${TENTHS:-}" ]; then
  PYTHONPATH=$W/suite/src python3 $REPO/.carry-h100/tune.py scripts/make-slowed-wheels bert_base 64 $W/tune.json || { say "tuning failed"; touch $W/job.done; exit 3; }
  TENTHS=$(python3 -c "import json; print(json.load(open('$W/tune.json'))['chosen_tenths'])")
else cp $REPO/.carry-h100/tune-first-call.json $W/tune.json; fi
say "tuned: $TENTHS tenths"
python3 $REPO/.carry-h100/patch.py scripts/make-slowed-wheels $TENTHS $W/builds/s1 $W/builds/s2
for b in n1 n2 s1 s2; do echo "$b: $(find $W/builds/$b/torch -type f | wc -l) real files under torch/, $(find $W/builds/$b/torch -type l | wc -l) links"; done
export PYTHONPATH=$W/site:$W/suite/src PATH=$W/site/bin:$PATH PIP_NO_INDEX=1 PIP_FIND_LINKS=$W/wheels
M="--manifest $W/exam/manifest.json --timeline $W/exam/timeline"
i=0
for b in n1 n2 s1 s2; do
  i=$((i+1))
  echo "\$ mpsbench build add-existing $W/builds/$b --channel gpu --id $b --date 2026-11-23T00:0$i:00Z $M"
  python3 -m mpsbench.cli build add-existing $W/builds/$b --channel gpu --id $b --date 2026-11-23T00:0$i:00Z $M || { touch $W/job.done; exit 3; }
done
python3 -m mpsbench.cli build list $M
run() {  # NAME ARGS...: one mpsbench command, its transcript and wall time
  local name=$1; shift
  local s=$(date +%s)
  say "start $name"
  echo "\$ mpsbench $* -b \"$B\" $M --log $W/asv-$name.log" > $W/$name.txt
  python3 -m mpsbench.cli "$@" -b "$B" $M --log $W/asv-$name.log >> $W/$name.txt 2>&1
  local rc=$?
  echo "exit $rc, wall $(( $(date +%s) - s )) s" >> $W/$name.txt
  cat $W/$name.txt
  say "end $name: exit $rc"
}
run bisect bisect gpu@n1 gpu@s2
run aa compare gpu@n1 gpu@n2
say "done"
touch $W/job.done
