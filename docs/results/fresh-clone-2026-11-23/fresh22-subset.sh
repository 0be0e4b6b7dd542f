#!/usr/bin/env bash
# issue 22b: README's command over the Linux default's four builds, a documented subset (-b), timed
set -u
cd /tmp/fresh22
echo "start $(date -u +%FT%TZ)"
start=$(date +%s)
nice -n 19 scripts/bench \
  -b "benchmark_models\.Training\.time_step\('cpu', '(mlp', (8|1024)|lenet5', 128|resnet50', 8|bert_base', 8)\)|benchmark_models\.Inference\.time_step\('cpu', '(resnet50|bert_base)', 8\)" \
  HASHFILE:.asv/default-py3.11.txt
rc=$?
echo "scripts/bench rc=$rc after $(( $(date +%s) - start )) s; end $(date -u +%FT%TZ)"
