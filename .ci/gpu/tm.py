# tm.py LABEL CMD...: runs CMD (timeout TM_TIMEOUT s, output to /tmp/logs/LABEL.out) and
# prints its wall time, CPU seconds and peak RSS.
import os, resource, subprocess, sys, time
label, cmd = sys.argv[1], sys.argv[2:]
t = time.time()
try:
    with open(f"/tmp/logs/{label}.out", "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=float(os.environ.get("TM_TIMEOUT", "300"))).returncode
except subprocess.TimeoutExpired:
    rc = "timeout"
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{label:24s} wall {time.time()-t:7.1f} s  cpu {ru.ru_utime+ru.ru_stime:7.1f} s  peak RSS {ru.ru_maxrss/1048576:6.2f} GB  rc {rc}", flush=True)
