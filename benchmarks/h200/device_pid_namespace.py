"""Does nvidia-smi name compute processes by pids of zlops' own pid namespace? (issue 12, item 2)

zlops.host.contention calls a process on the shard's GPU foreign when it is not of zlops' process tree
and its pid exists in zlops' namespace. This checks both halves on a real GPU: a torch child of
this process (own) and a torch process started outside its tree (foreign) each hold GPU memory;
nvidia-smi's compute-apps list must name both by the pids this process sees. Needs torch, psutil.

    python3 benchmarks/h200/device_pid_namespace.py
"""

import os
import signal
import subprocess
import sys
import time

import psutil

B = "import torch,time; x=torch.ones(1<<28,device='cuda'); time.sleep(40)"
own = subprocess.Popen([sys.executable, "-c", B])
d = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{B}" >/dev/null 2>&1 & echo $!'], capture_output=True,
                   text=True)
foreign = int(d.stdout.strip())
time.sleep(15)
out = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv"],
                     capture_output=True, text=True).stdout
print(out)
pids = [int(line.split(",")[1]) for line in out.splitlines()[1:] if line.strip()]
tree = {os.getpid(), *(c.pid for c in psutil.Process().children(recursive=True))}
print("own child", own.pid, "listed:", own.pid in pids, "in own tree:", own.pid in tree)
print("foreign", foreign, "listed:", foreign in pids, "pid_exists:", psutil.pid_exists(foreign),
      "in own tree:", foreign in tree)
own.kill()
os.kill(foreign, signal.SIGKILL)
