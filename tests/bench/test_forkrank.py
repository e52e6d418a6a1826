"""The agent imports the worker (torch) once and forks its ranks (ncclcheck/bench/forkrank.py).

Three real runs: the agent itself with two gloo ranks (torch imported by the agent alone), a
script that forks ranks through :mod:`ncclcheck.bench.forkrank` as the agent does and has each
report what it was started with (what ``Popen`` would have given it), and the agent with a torch
that fails to import (it spawns, and the rank's own error reaches the report as before).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scriptload import load

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch]

#: The meta-path finder that writes the pid of every process that imports torch (one copy, the
#: start-up benchmark's: its file names the log in ``BENCH_STARTUP_IMPORTS``).
SPY = load(Path("scripts/bench-startup.py"), "bench_startup").SPY


def agent_spec(tmp_path: Path, ranks: int) -> dict:
    from ncclcheck.bench.agent import free_port
    from ncclcheck.bench.command import BenchRequest, bench_options

    opts = bench_options(BenchRequest(min_bytes="1K", max_bytes="1K", warmup=1, iters=2,
                                      timeout=30))
    return {"node_rank": 0, "local_ranks": ranks, "rank_offset": 0, "world_size": ranks,
            "master_addr": "127.0.0.1", "master_port": free_port(), "env": {},
            "nccl_log_dir": str(tmp_path / "logs"), "worker": opts.worker_spec("gloo")}


def run_agent(spec: dict, env: dict) -> tuple[subprocess.CompletedProcess, list[dict], int]:
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck.bench.agent"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        out, err = proc.communicate(json.dumps(spec), timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), events, proc.pid


def test_the_agent_imports_torch_once_and_forks_its_ranks(tmp_path):
    """Fails on a per-rank ``python -m ncclcheck.bench.worker``: each rank imported torch."""
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "sitecustomize.py").write_text(SPY)
    log = tmp_path / "imports"
    path = os.pathsep.join([str(spy), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path,
           "BENCH_STARTUP_IMPORTS": str(log)}
    out, events, agent_pid = run_agent(agent_spec(tmp_path, 2), env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert [e["ev"] for e in events if e["ev"] in ("started", "result", "done")] == \
        ["started", "result", "done"]
    assert log.read_text().split() == [str(agent_pid)]  # one import, in the agent
    doc = next(e["doc"] for e in events if e["ev"] == "result")
    pids = {r["pid"] for r in doc["transport"]["per_rank"]}
    assert len(pids) == 2 and agent_pid not in pids  # two rank processes of their own
    assert out.stderr == ""  # what the import printed went to the ranks' stderr files
    if importlib.util.find_spec("numpy") is None:  # torch warns it cannot use numpy
        for rank in (0, 1):
            text = (tmp_path / "logs" / f"rank.{rank}.stderr").read_text()
            assert "Failed to initialize NumPy" in text


#: Forks ranks as the agent does (its signal handlers, its pipes open) and prints each rank's
#: report and exit code as JSON. Argument: the folder for the ranks' stderr files.
PROBE = r"""
import atexit, ctypes, json, os, signal, subprocess, sys, threading, time
from ncclcheck.bench import forkrank

folder = sys.argv[1]
atexit.register(lambda: open(os.path.join(folder, "atexit"), "a").write(f"{os.getpid()}\n"))
for signum in forkrank.AGENT_SIGNALS:
    signal.signal(signum, lambda *_: os._exit(99))
ctypes.CDLL(None).setenv(b"C_ONLY", b"1", 1)  # in the C environment, not in os.environ
threads_before = threading.active_count()
loaded = forkrank.load_worker({"OMP_NUM_THREADS": "1", "SHARED": "yes"})
import torch
facts = {"threads": [threads_before, threading.active_count()],
         "tasks": len(os.listdir("/proc/self/task")), "cuda": torch.cuda.is_initialized()}
env = {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1", "RANK": "5"}

def report():
    fds = [fd for fd in range(3, 1024) if _open(fd)]
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    print(json.dumps({
        "environ": dict(os.environ), "c_only": libc.getenv(b"C_ONLY"), "fds": fds,
        "stdin": os.readlink("/proc/self/fd/0"), "stderr": os.readlink("/proc/self/fd/2"),
        "signals": {signal.Signals(s).name: _handler(signal.getsignal(s))
                    for s in forkrank.AGENT_SIGNALS},
        "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "ppid": os.getppid(), "cmdline": open("/proc/self/cmdline", "rb").read().decode(),
        "proc_environ": open("/proc/self/environ", "rb").read().decode(),
        "torch_threads": torch.get_num_threads(), "argv": sys.argv}, default=str))
    return 0

def _handler(h):
    return h.__name__ if callable(h) else int(h)  # SIG_DFL is 0

def _open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False

def planted():
    raise ValueError("planted")

def sleeper():
    time.sleep(60)
    return 0

err = lambda name: os.path.join(folder, name + ".stderr")
ranks = {"report": forkrank.start(report, env, err("report"), loaded[1] + b"IMPORT SAID\n"),
         "planted": forkrank.start(planted, env, err("planted")),
         "exits3": forkrank.start(lambda: sys.exit(3), env, err("exits3")),
         "sleeper": forkrank.start(sleeper, env, err("sleeper")),
         "killed": forkrank.start(sleeper, env, err("killed"))}
facts["report"] = json.loads(ranks["report"].stdout.read())  # EOF with siblings alive
try:
    ranks["sleeper"].wait(0.2)
    facts["timeout"] = False
except subprocess.TimeoutExpired:
    facts["timeout"] = True
ranks["sleeper"].terminate()
ranks["killed"].kill()
facts["codes"] = {name: rank.wait(30) for name, rank in ranks.items()}
facts["pid"] = os.getpid()
print(json.dumps(facts))
"""


def test_a_forked_rank_is_started_as_popen_would_start_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "SHARED"))}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.splitlines()[-1])
    assert facts["threads"] == [1, 1] and facts["cuda"] is False  # nothing to make fork unsafe
    rank = facts["report"]
    assert rank["environ"] == {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1",
                               "RANK": "5"}  # replaced, not merged
    assert rank["c_only"] is None
    assert rank["fds"] == [] and rank["stdin"] == "/dev/null"
    assert rank["stderr"] == str(tmp_path / "report.stderr")
    assert rank["signals"] == {"SIGTERM": 0, "SIGHUP": 0, "SIGINT": "default_int_handler"}
    assert rank["blocked"] == [] and rank["ppid"] == facts["pid"]
    # what ps and /proc show: the spawned rank's command line, the rank's environment
    assert rank["cmdline"] == f"{sys.executable}\0-m\0ncclcheck.bench.worker\0"
    assert rank["proc_environ"] == "".join(f"{k}={v}\0" for k, v in rank["environ"].items())
    assert rank["argv"][0].endswith("ncclcheck/bench/worker.py")
    assert rank["torch_threads"] == 1  # OMP_NUM_THREADS set before the import (else: cores)
    assert (tmp_path / "report.stderr").read_text().endswith("IMPORT SAID\n")
    assert facts["timeout"] is True
    assert facts["codes"] == {"report": 0, "planted": 1, "exits3": 3, "sleeper": -15,
                              "killed": -9}
    planted = (tmp_path / "planted.stderr").read_text()
    assert planted.startswith("Traceback (most recent call last):")
    assert planted.endswith("ValueError: planted\n")
    assert (tmp_path / "atexit").read_text().split() == [str(facts["pid"])]  # not the ranks'


def test_when_torch_does_not_import_the_agent_spawns_and_the_rank_says_why(tmp_path):
    broken = tmp_path / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("planted: this torch is broken")\n')
    env = {**os.environ, "PYTHONPATH": str(broken.parent)}
    out, events, _ = run_agent(agent_spec(tmp_path, 2), env)
    assert out.returncode == 1 and out.stderr == ""
    exits = [e for e in events if e["ev"] == "rank_exit"]
    assert exits and exits[0]["code"] == 1, events
    assert exits[0]["stderr_tail"][-1] == "ImportError: planted: this torch is broken"


def test_hello_imports_no_torch():
    """The launcher's first question to every node stays fast: only a run imports the worker."""
    code = ("import sys\nfrom ncclcheck.bench import agent\nagent.main(['--hello'])\n"
            "print('torch' in sys.modules, 'ncclcheck.bench.worker' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    hello, loaded = out.stdout.splitlines()[-2:]
    assert json.loads(hello)["ev"] == "hello" and loaded == "False False", out.stderr[-2000:]


KEPT = """
import json, os
from ncclcheck.bench import forkrank
base = {"OMP_NUM_THREADS": "1", "MASTER_PORT": "29501", "NCCL_SOCKET_IFNAME": "=eth0"}
first = forkrank.load_worker(base)
later = forkrank.load_worker({**base, "MASTER_PORT": "29502", "NCCL_SOCKET_IFNAME": "=eth1",
                              "GLOO_SOCKET_IFNAME": "eth1", "NCCL_ALGO": "Ring"})
debug = forkrank.load_worker({**base, "TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
threads = forkrank.load_worker({**base, "OMP_NUM_THREADS": "2"})
print(json.dumps([x is not None for x in (first, later, debug, threads)]
                 + [first is not None and later is not None and first[1] == later[1]]))
"""


def test_a_kept_agent_forks_a_later_run_only_under_the_variables_torch_read_at_import():
    """A session's agent (bench/session.py) imported torch under its first run's variables: a
    later run that differs only in what the rank reads after the import (NCCL's, gloo's, the
    rendezvous) forks from it; one that sets what torch or libgomp read at import
    (TORCH_DISTRIBUTED_DEBUG, OMP_NUM_THREADS) is spawned, as the review of the session found
    (it was measured under the first run's)."""
    out = subprocess.run([sys.executable, "-c", KEPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True, False, False, True]
