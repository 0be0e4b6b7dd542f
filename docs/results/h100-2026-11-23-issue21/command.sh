cd .carry-21
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/src ASV_PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 MPSBENCH_DEVICES=cuda
printf "%s\n" /tmp/site $PWD/src > "$(python3 -c "import site; print(site.getsitepackages()[0])")/mpsbench-carry.pth"
python3 -c "import torch, transformers, torchvision, triton; print(torch.__version__, transformers.__version__, torchvision.__version__, triton.__version__, torch.cuda.get_device_name(0))"
nproc; date -u; START=$(date +%s)
git init -q -b release .asv/timeline && git -C .asv/timeline -c user.name=h -c user.email=h@h commit -q --allow-empty -m "torch 2.11 on the H100"
HASH=$(git -C .asv/timeline rev-parse HEAD)
python3 -m asv machine --yes --machine h100-sxm >/dev/null
ASV="python3 -m asv run --python=same --set-commit-hash $HASH --machine h100-sxm --launch-method forkserver --record-samples --show-stderr"
python3 -m mpsbench.cli preselect --list > $OUT/preselect.tsv 2>&1
PAT=$(python3 -c "import sys,re; n=[l.split('\t')[0] for l in open(sys.argv[1]) if l.rstrip('\n').endswith('\truns') and re.match(r'benchmark_(modern|compile|patterns)\.', l)]; print('^(?:'+'|'.join(re.escape(x) for x in n)+')$')" $OUT/preselect.tsv)
T0=$(date +%s)
$ASV -b "$PAT" > $OUT/asv-default.log 2>&1; echo "asv rc=$?"
grep -E "^\[.*(benchmark_|failed|n/a)|^ *[0-9.]+(ms|s|μs)|^ +\[|\]$" $OUT/asv-default.log | grep -v "Benchmarking\|Discovering" | tail -90
echo "default wall $(( $(date +%s) - T0 )) s"
T0=$(date +%s)
MPSBENCH_FULL=1 $ASV -b '^benchmark_patterns\.LeakPatterns\.track_growth\(.cuda' > $OUT/asv-leak.log 2>&1; echo "leak rc=$?"
tail -14 $OUT/asv-leak.log
echo "leak wall $(( $(date +%s) - T0 )) s"
mkdir -p $OUT/results; cp .asv/results/h100-sxm/*.json .asv/results/benchmarks.json $OUT/results/ 2>/dev/null


echo probe done in the first call
date -u
