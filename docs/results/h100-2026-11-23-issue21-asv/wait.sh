#!/bin/bash
# Wait for the background job (at most $1 s), then copy what it wrote so far to $OUT (8 files at most).
W=${W:-/tmp/w}; T=$(date +%s)
while [ ! -e $W/job.done ] && [ $(( $(date +%s) - T )) -lt $1 ]; do sleep 3; done
cp $W/job.log $OUT/ 2>/dev/null
(cd $W && tar czf $OUT/logs.tar.gz job.log *.txt asv-*.log tune.json exam/manifest.json 2>/dev/null)
[ "$W" = /tmp/w ] && [ -d /tmp/cal ] && (cd /tmp/cal && tar czf $OUT/cal.tar.gz results timeline asv.log asv.conf.json 2>/dev/null)
[ -e $W/job.done ] && echo JOB-DONE || echo JOB-RUNNING
tail -c 9000 $W/job.log
