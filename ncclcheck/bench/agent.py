"""The per-node agent: starts this node's ranks and reports for them.

The launcher starts one agent per node, over ssh under :mod:`ncclcheck.remote.watchdog` (or locally,
under the same watchdog), as::

    python -m ncclcheck.bench.agent --hello     # facts the launcher needs first, then exit
    python -m ncclcheck.bench.agent             # the run: the spec (JSON) arrives on stdin
    python -m ncclcheck.bench.agent --serve     # a session: requests, one per stdin line

``--hello`` prints one JSON line: host name, visible GPUs (NVML, honouring
``CUDA_VISIBLE_DEVICES``), whether torch is importable, the address ssh reached this node on
(``SSH_CONNECTION``) and a free TCP port for the rendezvous store.

A run starts one rank per local rank with the rank's variables, the candidate configuration, and
``NCCL_DEBUG=INFO`` into ``<log dir>/nccl.%h.%p``: it imports the worker (torch) once and forks
each rank from itself (:mod:`~ncclcheck.bench.forkrank`: one torch import per node, not per rank;
``--hello`` imports none), or, when that import fails here, spawns
``python -m ncclcheck.bench.worker`` per rank so that the rank reports why. It forwards the
ranks' JSON events to its stdout, one per line, adding ``node``; it ends with ``done`` when
every rank exited 0. When a rank fails it reports ``rank_exit`` (exit code, the tail of the
rank's stderr, the NCCL WARN lines of its log), stops the other ranks and exits 1. SIGTERM,
SIGHUP and SIGINT stop the ranks too, and each rank also dies with the agent
(``PR_SET_PDEATHSIG``). The log directory is announced first (``started``) and removed only
after a clean run, so the launcher can say where a failed run's logs are on every node.

``--serve`` keeps one agent for many runs (``tune``'s candidates,
:class:`~ncclcheck.bench.session.Session`): each stdin line is a request, ``{"op": "hello"}``
(answered with the hello line) or ``{"op": "run", "spec": ...}`` (a run as above, ending with
``done``). The worker's torch is imported at the first run and kept, so a later run forks its
ranks at once; the ranks still start fresh, and NCCL reads its variables in each. A failed run
ends the session (exit 1); end of file ends it cleanly.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ncclcheck.bench import forkrank, transport
from ncclcheck.bench.environ import nccl_debug_env

STOP_GRACE_S = 2.0


def visible_gpus() -> int:
    """GPUs this node's ranks can use: NVML's count, cut to ``CUDA_VISIBLE_DEVICES``."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library: no GPU
        return 0
    if cvd is not None:
        listed = [d for d in cvd.split(",") if d.strip() and d.strip() != "-1"]
        return min(count, len(listed))
    return count


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def shaped_links() -> list[dict[str, Any]]:
    """The links ``tc`` shapes on this node (``tc qdisc show``, 5 s at most); [] without tc.
    The expected-bandwidth verdict holds each link's figure against the rate it is shaped to."""
    from ncclcheck.expected.qdisc import parse_qdiscs

    tc = shutil.which("tc") or next((p for p in ("/usr/sbin/tc", "/sbin/tc")
                                     if os.access(p, os.X_OK)), None)
    if not tc:
        return []
    try:
        out = subprocess.run([tc, "qdisc", "show"], capture_output=True, text=True, timeout=5,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_qdiscs(out.stdout) if out.returncode == 0 else []


def hello() -> dict[str, Any]:
    """What the launcher needs to know about this node before it plans the run."""
    from ncclcheck.bench.ifname import local_interfaces

    ssh = os.environ.get("SSH_CONNECTION", "").split()
    addresses = sorted({a for _, a in local_interfaces() if a and not a.startswith("127.")})
    return {"ev": "hello", "hostname": socket.gethostname(), "gpus": visible_gpus(),
            "torch": importlib.util.find_spec("torch") is not None,
            "python": sys.executable, "ssh_server_addr": ssh[2] if len(ssh) >= 4 else None,
            "addresses": addresses, "links": shaped_links(),
            "free_port": free_port(), "pid": os.getpid()}


class Agent:
    """Runs one node's ranks from a spec and reports their events."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.node = int(spec["node_rank"])
        self.procs: list[Any] = []  # subprocess.Popen or forkrank.ForkedRank
        self.events: queue.Queue = queue.Queue()
        self.out_lock = threading.Lock()
        self.stopping = False
        self.made_log_dir = not spec.get("nccl_log_dir")
        self.log_dir = spec.get("nccl_log_dir") or tempfile.mkdtemp(prefix="ncclcheck-bench-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.errored: set[int] = set()
        self.readers: list[threading.Thread] = []

    def say(self, event: dict[str, Any]) -> None:
        """Write one event line to stdout (the launcher)."""
        event.setdefault("node", self.node)
        with self.out_lock:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
            sys.stdout.flush()

    def rank_environment(self, local_rank: int) -> dict[str, str]:
        """The environment of local rank ``local_rank``."""
        spec = self.spec
        env = dict(os.environ)
        env.update({k: str(v) for k, v in spec.get("env", {}).items()})
        env.update(nccl_debug_env(env, self.log_dir))
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update({
            "RANK": str(spec["rank_offset"] + local_rank), "WORLD_SIZE": str(spec["world_size"]),
            "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(spec["local_ranks"]),
            "GROUP_RANK": str(self.node), "NODE_RANK": str(self.node),
            "MASTER_ADDR": str(spec["master_addr"]), "MASTER_PORT": str(spec["master_port"]),
            "NCCLCHECK_BENCH_SPEC": json.dumps(spec["worker"]), "NCCLCHECK_BENCH_AGENT": "1",
        })
        return env

    def _read(self, index: int, pipe: Any) -> None:
        for raw in iter(pipe.readline, b""):
            self.events.put((index, raw.decode("utf-8", "replace").rstrip("\n")))
        self.events.put((index, None))

    def start(self) -> None:
        """Start every local rank: forked from this process after one import of the worker
        (torch) when it imports (:mod:`~ncclcheck.bench.forkrank`), else spawned."""
        envs = [self.rank_environment(i) for i in range(int(self.spec["local_ranks"]))]
        loaded = forkrank.load_worker(forkrank.shared_environment(envs)) if envs else None
        for local_rank, env in enumerate(envs):
            rank = self.spec["rank_offset"] + local_rank
            path = os.path.join(self.log_dir, f"rank.{rank}.stderr")
            if loaded:
                self.procs.append(forkrank.start(loaded[0], env, path, loaded[1]))
                continue
            with open(path, "wb") as stderr:
                proc = subprocess.Popen([sys.executable, "-m", "ncclcheck.bench.worker"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=stderr, env=env)
            self.procs.append(proc)
        for index, proc in enumerate(self.procs):
            reader = threading.Thread(target=self._read, args=(index, proc.stdout), daemon=True)
            reader.start()
            self.readers.append(reader)

    def failure_report(self, index: int, code: int) -> dict[str, Any]:
        """Why local rank ``index`` ended: its stderr's last lines and its NCCL WARN lines."""
        proc = self.procs[index]
        rank = self.spec["rank_offset"] + index
        tail: list[str] = []
        try:
            with open(os.path.join(self.log_dir, f"rank.{rank}.stderr"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 8192))
                tail = [ln for ln in f.read().decode("utf-8", "replace").splitlines()
                        if ln.strip()][-8:]
        except OSError:
            pass
        warn: list[str] = []
        for path in glob.glob(os.path.join(self.log_dir, f"nccl.*.{proc.pid}")):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for entry in transport.parse_nccl_log(f.read(8 << 20)):
                        warn.extend(entry["warnings"])
            except OSError:
                pass
        return {"ev": "rank_exit", "rank": rank, "local_rank": index, "code": code,
                "host": socket.gethostname(), "stderr_tail": tail, "nccl_warn": warn[-5:],
                "log_dir": self.log_dir}

    def stop_ranks(self) -> None:
        """SIGTERM every live rank, SIGKILL what is left after a grace period."""
        self.stopping = True
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        end = time.monotonic() + STOP_GRACE_S
        for proc in self.procs:
            try:
                proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        for proc in self.procs:
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass

    def run(self) -> int:
        """Spawn, forward, supervise; the agent's exit code."""
        self.start()
        self.say({"ev": "started", "ranks": len(self.procs), "log_dir": self.log_dir})
        open_pipes = len(self.procs)
        exits: dict[int, int] = {}
        while True:
            try:
                index, line = self.events.get(timeout=0.2)
                if line is None:
                    open_pipes -= 1
                elif line.startswith("{"):
                    try:
                        event = json.loads(line)
                    except ValueError:
                        event = {"ev": "output", "text": line[:500]}
                    if event.get("ev") == "error":
                        self.errored.add(index)
                        event.setdefault("log_dir", self.log_dir)
                    self.say(event)
            except queue.Empty:
                pass
            for index, proc in enumerate(self.procs):
                code = proc.poll()
                if code is None or index in exits:
                    continue
                exits[index] = code
                if code != 0:
                    self.drain_for(0.3)
                    self.say(self.failure_report(index, code))
                    self.stop_ranks()
                    self.drain_for(0.2)
                    return 1
            if len(exits) == len(self.procs) and open_pipes <= 0:
                break
        for reader in self.readers:   # each has read its end of file: a session's next run
            reader.join(1.0)          # forks with no other thread (forkrank.load_worker)
        self.say({"ev": "done", "host": socket.gethostname()})
        if self.made_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        return 0

    def drain_for(self, seconds: float) -> None:
        """Forward what the ranks still have to say for up to ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                _, line = self.events.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                return
            if line and line.startswith("{"):
                try:
                    self.say(json.loads(line))
                except ValueError:
                    pass


def serve(current: list[Agent]) -> int:
    """``--serve``: the requests on stdin, one JSON line each, until end of file (see the
    module's docstring); ``current`` holds the running agent, for the signal handler."""
    base = dict(os.environ)           # each run starts from it: forkrank.load_worker sets
    for raw in iter(sys.stdin.buffer.readline, b""):         # a run's variables in this process
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        if not isinstance(request, dict) or request.get("op") not in ("hello", "run"):
            print(f"ncclcheck agent: not a request: {raw[:200]!r}", file=sys.stderr, flush=True)
            return 2
        os.environ.clear()            # a variable one candidate set is not the next one's
        os.environ.update(base)
        if request["op"] == "hello":
            sys.stdout.write(json.dumps(hello()) + "\n")
            sys.stdout.flush()
            continue
        current[:] = [Agent(request["spec"])]
        code = current[0].run()
        current.clear()
        if code:
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ncclcheck.bench.agent [--hello | --serve]``."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--hello"]:
        print(json.dumps(hello()), flush=True)
        return 0
    if args not in ([], ["--serve"]):
        print(f"usage: python -m ncclcheck.bench.agent [--hello | --serve] (got {args})",
              file=sys.stderr)
        return 2
    current: list[Agent] = []

    def on_signal(signum: int, _frame: Any) -> None:
        for agent in current:
            agent.stop_ranks()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)
    if args == ["--serve"]:
        return serve(current)
    current.append(Agent(json.loads(sys.stdin.read() or "{}")))
    return current[0].run()


if __name__ == "__main__":
    sys.exit(main())
