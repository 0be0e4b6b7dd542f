"""PROCESSES SAMPLES THREADS|default: fresh processes of proc.py in turn beside a one-core busy loop; writes exp-THREADS-SAMPLES.json here."""
import json, os, subprocess, sys, statistics
HERE = os.path.dirname(os.path.abspath(__file__))
procs, n, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
env = dict(os.environ)
if threads != "default": env["OMP_NUM_THREADS"] = threads
rows = []
try:
    for i in range(procs):
        r = subprocess.run([sys.executable, os.path.join(HERE, "proc.py"), str(n)], capture_output=True, text=True, env=env)
        s = json.loads(r.stdout.strip().splitlines()[-1]); rows.append(s)
        print(f"proc {i}: min10 {min(s[:10]):.2f} min{n} {min(s):.2f} med {statistics.median(s):.2f} q10 {sorted(s)[len(s)//10]:.2f}", flush=True)
finally:
    busy.kill()
json.dump(rows, open(os.path.join(HERE, f"exp-{threads}-{n}.json"), "w"))
