#!/bin/bash
# Wait for the background job (at most $1 s), then copy what it wrote to $OUT.
W=/tmp/h23; T=$(date +%s)
while [ ! -e $W/job.done ] && [ $(( $(date +%s) - T )) -lt $1 ]; do sleep 3; done
cp $W/job.log $OUT/ 2>/dev/null
for f in aa bisect slow; do cp $W/$f.txt $OUT/ 2>/dev/null; done
cp $W/tune.json $OUT/ 2>/dev/null
(cd $W && tar czf $OUT/h23-logs.tar.gz job.log tune.json *.txt asv-*.log exam/manifest.json 2>/dev/null)
[ -e $W/job.done ] && echo JOB-DONE || echo JOB-RUNNING
tail -c 9000 $W/job.log
