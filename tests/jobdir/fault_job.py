"""A gloo training loop with one planted fault, run by the jobdir tests under torchrun or srun.

FAULT (none, skip, sleep, exit, sigkill, sigsegv, other, size) hits rank FAULT_RANK at the fifth
collective. Like NCCL's dump-on-timeout (TORCH_NCCL_DUMP_ON_TIMEOUT=1), the job's own exception
and SIGTERM handlers write the Flight Recorder dump to TORCH_FR_DUMP_TEMP_FILE + rank; the SIGTERM
handler also prints where the rank was (its Python stack) with faulthandler, which writes no
``[rankN]:`` prefix: only torchrun's --log-dir file, or --tee's header, tells whose it is.

FR_DUMP=json writes the dump as ``_dump_fr_trace_json()`` does (no call stacks) instead of the
pickle with stacks (``_dump_fr_trace()``, the default): symbolising the stacks imports
torch._inductor, ~2.5 CPU-s per rank, which the jobs whose stacks no test reads skip.

A rank that calls another collective ("other", "size") waits COLL_TIMEOUT x 3: in a real mismatch
hang the ranks that called the usual collective time out first, and torchrun's Root Cause names
one of them, not the planted rank.
The peers of a rank that skips one ("skip") wait COLL_TIMEOUT x 3 too: the skipping rank dumps,
leaves the group and exits 0 before they time out, as a rank that went on does. With 1 x, on a
loaded machine it was still exiting when its peers' timeout came, torchrun stopped it (-15), and
diagnose rightly called it "stuck ... alive elsewhere when stopped".
"""

import ctypes
import datetime
import faulthandler
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

FAULT = os.environ.get("FAULT", "none")
RANK = int(os.environ.get("RANK") or os.environ["SLURM_PROCID"])
ME = RANK == int(os.environ.get("FAULT_RANK", "-1"))
PREFIX = os.environ["TORCH_FR_DUMP_TEMP_FILE"]


def fr_trace() -> bytes:
    if os.environ.get("FR_DUMP") == "json":
        return torch._C._distributed_c10d._dump_fr_trace_json()
    return torch._C._distributed_c10d._dump_fr_trace()


def dump() -> None:
    with open(f"{PREFIX}{RANK}", "wb") as f:
        f.write(fr_trace())


def on_term(signum, frame):
    faulthandler.dump_traceback(sys.stderr, all_threads=False)
    dump()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


signal.signal(signal.SIGTERM, on_term)
if "SLURM_PROCID" in os.environ:
    os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
    os.environ.setdefault("WORLD_SIZE", os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
t = torch.ones(8)
dist.all_reduce(t)                      # everyone is here: from now on, short timeouts
dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=float(
    os.environ.get("COLL_TIMEOUT", "3")) * (3 if (ME and FAULT in ("other", "size"))
                                            or (not ME and FAULT == "skip") else 1)))
try:
    for step in range(3):
        dist.all_reduce(t)
    if ME and FAULT == "exit":
        os._exit(3)
    if ME and FAULT == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if ME and FAULT == "sigsegv":
        ctypes.string_at(0)
    if ME and FAULT == "sleep":
        # the first pickle dump with entries imports much of torch (its stacks: seconds on a
        # loaded machine): done now, the SIGTERM handler's dump fits Slurm's KillWait (3 s in
        # the test cluster)
        fr_trace()
        time.sleep(60)
    if ME and FAULT == "skip":
        pass
    elif ME and FAULT == "other":
        dist.broadcast(t, 0)
    elif ME and FAULT == "size":
        dist.all_reduce(torch.ones(16))
    else:
        dist.all_reduce(t)
    dump()
    dist.destroy_process_group()
except Exception as exc:
    print(f"[rank{RANK}]: {exc}", file=sys.stderr, flush=True)
    dump()
    raise
