#!/usr/bin/env bash
# issue 22b: README's main command from a fresh clone, timed
set -u
echo "start $(date -u +%FT%TZ)"
git clone -q /work/wt-22b /tmp/fresh22 && cd /tmp/fresh22 && git log --oneline -1
start=$(date +%s)
nice -n 19 scripts/bench
rc=$?
echo "scripts/bench rc=$rc after $(( $(date +%s) - start )) s; end $(date -u +%FT%TZ)"
