"""Start the ranks and watch them: one node, many nodes over ssh, or inside a launcher.

* **Single node** (no ``--hostfile``): one local agent (:mod:`~ncclcheck.bench.agent`) under
  :mod:`ncclcheck.watchdog` spawns one rank per visible GPU (NCCL), or ``--procs N`` CPU ranks
  (gloo) when there is no GPU.
* **Many nodes** (``--nodes N --hostfile FILE``): every node answers ``agent --hello`` over ssh
  first (reachable? GPUs? torch?); then one agent per node starts over the system ssh
  (:class:`ncclcheck.remote.SSH`: BatchMode, ConnectTimeout, ``~/.ssh/config`` or ``-F``), with
  the same interpreter path as this one unless ``--remote-python``. Rank 0 hosts the
  torch.distributed TCPStore on the first node, at the address ssh reached that node on
  (``--master-addr``/``--master-port`` override it).
* **Inside a launcher** (torchrun, srun, mpirun, DeepSpeed): :func:`run_in_launcher` runs this
  process as the rank it was given and spawns nothing.
* **Through Slurm** (``--launcher slurm``, the default inside salloc/sbatch without
  ``--hostfile``): :func:`ncclcheck.slurm.bench_via_srun` starts one rank per node with srun.

:class:`Monitor` watches the agents' event streams. Nothing hangs: rendezvous and each
collective have ``--timeout`` (the process group's); the monitor also fails the run when an
agent ends early, or, as a backstop, when no event arrives for as long as a whole block of ops
may take at ``--timeout`` each (:func:`stall_limit`). On failure it names the node or rank and
why (the rank's error, its NCCL WARN lines, or ssh's error), stops every agent and waits for
the nodes' watchdogs to confirm that the agents and ranks are gone (:meth:`Monitor.stop_all`),
then raises :class:`NcclcheckError` (exit 1). A ``--master-addr`` that is not an address of the
first node, where rank 0 hosts the TCPStore, is refused before anything starts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import queue
import re
import shutil
import socket
import sys
import tempfile
import time
from typing import Any, Callable

from ncclcheck.bench.environ import detect_launcher, nccl_debug_env, rank_env, rendezvous
from ncclcheck.bench.formulas import OPS
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.slurm import bench_via_srun, in_allocation

INSTALL_HINT = "torch is not installed; pip install 'ncclcheck[bench]'"
STALL_MARGIN_S = 10.0
FAILURE_GRACE_S = 2.0
#: Seconds the launcher waits for the nodes' watchdogs to stop their agents and ranks.
STOP_WAIT_S = 6.0
#: Messages that say a rank saw a peer go away: a consequence, not the cause.
CONSEQUENCE_RE = re.compile(r"connection (closed|reset)|closed by peer|broken pipe|"
                            r"connection refused|end of file|socket.*closed|timed out|"
                            r"timeout|peer|ECONNRESET|EPIPE", re.I)


@dataclasses.dataclass
class BenchOptions:
    """Everything ``ncclcheck bench`` was asked to do (the CLI fills it)."""

    op: str = "all_reduce"
    dtype: str = "float"
    sizes: list[int] = dataclasses.field(default_factory=lambda: [8])
    warmup: int = 5
    iters: int = 20
    check: int = 1
    backend: str = "auto"
    procs: int | None = None
    timeout: float = 300.0
    candidate_env: dict[str, str] = dataclasses.field(default_factory=dict)
    nodes: int | None = None
    hostfile: str | None = None
    ssh_config: str | None = None
    remote_python: str | None = None
    master_addr: str | None = None
    master_port: int | None = None
    connect_timeout: float = 10.0
    nccl_log_dir: str | None = None
    link_rate_gbps: float | None = None
    average: str = "mean"
    sweep: dict[str, Any] | None = None
    launcher: str | None = None  #: "ssh", "slurm", or None: slurm inside an allocation
    pairwise: dict[str, Any] | None = None  #: bench --pairwise (ncclcheck.bench.pairlaunch)

    def worker_spec(self, backend: str) -> dict[str, Any]:
        """What each rank needs to run the sweep."""
        return {"op": self.op, "dtype": self.dtype, "sizes": list(self.sizes),
                "warmup": self.warmup, "iters": self.iters, "check": self.check,
                "backend": backend, "timeout_s": self.timeout, "average": self.average,
                "sweep": self.sweep, "candidate_env": dict(self.candidate_env),
                "link_rate_gbps": self.link_rate_gbps, "pairwise": self.pairwise}


def torch_available() -> bool:
    """Whether ``import torch`` would find torch here (without importing it)."""
    if "torch" in sys.modules and sys.modules["torch"] is None:
        return False
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


class Progress:
    """Receives progress; the CLI passes a rich progress bar on a TTY, else this no-op."""

    def start(self, total: int) -> None:  # noqa: D102
        pass

    def update(self, done: int, row: dict[str, Any]) -> None:  # noqa: D102
        pass

    def stop(self) -> None:  # noqa: D102
        pass


def run(opts: BenchOptions, progress: Progress | None = None,
        watch: list | None = None) -> dict[str, Any] | None:
    """Run the bench as asked; the bench document (None on a non-zero rank in a launcher).
    Over ssh, the :class:`Monitor` is appended to ``watch`` (when given) before anything starts,
    so a caller can read what it saw when the run fails (``bench --pairwise`` goes on)."""
    progress = progress or Progress()
    if OPS[opts.op].name == "sendrecv" and opts.procs == 1 and not opts.hostfile:
        raise BadInput("sendrecv needs at least 2 ranks")
    launcher = detect_launcher(dict(os.environ))
    if opts.launcher == "slurm" and opts.hostfile:
        raise BadInput("--launcher slurm runs on the allocation's nodes; drop --hostfile")
    if launcher and not opts.hostfile and opts.launcher != "slurm":
        return run_in_launcher(opts, launcher, progress)
    if opts.launcher == "slurm" or (opts.launcher is None and not opts.hostfile
                                    and in_allocation(dict(os.environ))):
        if not torch_available():
            raise NcclcheckError(INSTALL_HINT)
        return bench_via_srun(opts, dict(os.environ), run_deadline(opts))
    if opts.hostfile:
        return run_multi_node(opts, progress, watch)
    if opts.nodes not in (None, 1):
        raise BadInput("--nodes needs --hostfile")
    return run_single_node(opts, progress)


# -- inside a launcher ------------------------------------------------------------------------
def run_in_launcher(opts: BenchOptions, launcher: str, progress: Progress) -> dict | None:
    """Act as the rank torchrun/srun/mpirun/DeepSpeed started; rank 0 returns the document."""
    if not torch_available():
        raise NcclcheckError(INSTALL_HINT)
    environ = dict(os.environ)
    ident = rank_env(environ)
    if (launcher == "mpi" and not (opts.master_addr or environ.get("MASTER_ADDR"))
            and environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
            != environ.get("OMPI_COMM_WORLD_SIZE")):
        from ncclcheck.bench.mpiaddr import rank0_address

        found = rank0_address()  # rank 0 tells over MPI where it is (Open MPI, bounded)
        if found:
            environ["MASTER_ADDR"] = found[1]
    ident["master_addr"], ident["master_port"] = rendezvous(
        environ, launcher, opts.master_addr, opts.master_port)
    made_log_dir = not opts.nccl_log_dir
    log_dir = opts.nccl_log_dir or tempfile.mkdtemp(prefix="ncclcheck-bench-")
    os.makedirs(log_dir, exist_ok=True)
    os.environ.update(opts.candidate_env)
    os.environ.update(nccl_debug_env(dict(os.environ), log_dir))
    from ncclcheck.bench.rankio import library_output_to

    where = f"rank {ident['rank']} on {socket.gethostname()}"
    kept = f" [rank logs kept in {log_dir}]"
    try:
        with library_output_to(os.path.join(log_dir, f"rank.{ident['rank']}.stderr")):
            doc = _run_this_rank(opts, ident, progress)
    except NcclcheckError as exc:
        raise NcclcheckError(f"{where}: {exc}{kept}") from None
    except Exception as exc:  # noqa: BLE001 - a collective or rendezvous failure: one line
        from ncclcheck.bench.worker import one_line

        raise NcclcheckError(f"{where}: {one_line(exc)}{kept}") from None
    finally:
        progress.stop()
    if made_log_dir:  # success: the rank read its log already
        shutil.rmtree(log_dir, ignore_errors=True)
    if doc is not None:
        doc["launch"] = {"mode": launcher, "master_addr": ident["master_addr"],
                         "master_port": ident["master_port"]}
    return doc


def _run_this_rank(opts: BenchOptions, ident: dict[str, Any], progress: Progress) -> dict | None:
    """Import torch and run the sweep as this rank (library output already goes to its log)."""
    from ncclcheck.bench import worker

    backend = opts.backend
    if backend == "auto":
        backend = "nccl" if worker.torch.cuda.is_available() else "gloo"

    def emit(event: dict[str, Any]) -> None:
        if event.get("ev") == "ready":
            progress.start(len(opts.sizes))
        elif event.get("ev") == "progress":
            progress.update(event["done"], event["row"])

    try:
        return worker.run_rank(opts.worker_spec(backend), ident, emit)
    except worker.RankFailure as exc:
        raise NcclcheckError(str(exc)) from None


# -- planning -----------------------------------------------------------------------------------
def plan_node(opts: BenchOptions, hello: dict[str, Any], slots: int | None, label: str,
              backend: str, multi_node: bool) -> int:
    """How many ranks a node runs: hostfile slots, --procs, its GPUs, or the CPU default."""
    gpus = int(hello.get("gpus") or 0)
    if opts.pairwise:  # one rank per node: the node is what the pairs measure
        slots = 1
    count = slots or opts.procs or (gpus if backend == "nccl" else (1 if multi_node else 2))
    if count < 1:
        raise BadInput(f"{label}: no ranks to run")
    if backend == "nccl" and count > gpus:
        raise BadInput(f"{label}: {count} ranks asked for but {gpus} GPUs visible "
                       "(use --backend gloo for CPU ranks)")
    return count


def choose_backend(requested: str, hellos: list[dict[str, Any]]) -> str:
    """``nccl`` when every node has a GPU (or when asked), else ``gloo``.

    >>> choose_backend("auto", [{"gpus": 8}, {"gpus": 0}]), choose_backend("auto", [{"gpus": 1}])
    ('gloo', 'nccl')
    """
    if requested != "auto":
        return requested
    return "nccl" if hellos and all(int(h.get("gpus") or 0) > 0 for h in hellos) else "gloo"


def agent_spec(opts: BenchOptions, backend: str, node: int, counts: list[int],
               master: tuple[str, int]) -> dict[str, Any]:
    """What node ``node``'s agent needs."""
    return {"node_rank": node, "local_ranks": counts[node], "rank_offset": sum(counts[:node]),
            "world_size": sum(counts), "master_addr": master[0], "master_port": master[1],
            "env": dict(opts.candidate_env), "nccl_log_dir": opts.nccl_log_dir,
            "worker": opts.worker_spec(backend)}


def check_master_addr(addr: str, addresses: list[str] | None, label: str) -> None:
    """Refuse a ``--master-addr`` that is an IP address the first node does not have: rank 0
    hosts the rendezvous store there, so every rank would wait ``--timeout`` for nothing.
    Names are left to the resolver.

    >>> check_master_addr("198.18.0.12", ["198.18.0.11"], "node1")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: --master-addr 198.18.0.12 is not an address of node1, the first node, where rank 0 hosts the rendezvous store (it has 198.18.0.11)
    """
    import ipaddress

    try:
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
    except ValueError:
        return
    if addresses is None or ip.is_loopback or ip.version != 4 or str(ip) in addresses:
        return
    raise BadInput(f"--master-addr {addr} is not an address of {label}, the first node, where "
                   f"rank 0 hosts the rendezvous store (it has {', '.join(addresses) or 'none'})")


def ops_between_beats(opts: BenchOptions) -> int:
    """Collectives a rank may run between two progress events: one placement's warm-up and
    timed block and its barrier, plus the gather and the ``-c`` check that follow a size.

    ``--timeout`` bounds each collective (torch.distributed's timeout), so a healthy block of
    many ops may take far longer than ``--timeout``; the launcher's watch allows for that.

    >>> ops_between_beats(BenchOptions(warmup=5, iters=20))
    34
    """
    return opts.warmup + opts.iters + 1 + 8


def stall_limit(opts: BenchOptions) -> float:
    """Seconds without any event after which the launcher gives the sweep up (a backstop: a
    stuck collective fails on its own after ``--timeout``)."""
    return opts.timeout * ops_between_beats(opts) + STALL_MARGIN_S


def run_deadline(opts: BenchOptions) -> float:
    """Seconds after which the remote watchdogs stop an agent no matter what (a backstop)."""
    return (stall_limit(opts) * (2 * len(opts.sizes) + 1) + 2 * opts.timeout
            + opts.connect_timeout + 60)


# -- single node --------------------------------------------------------------------------------
def run_single_node(opts: BenchOptions, progress: Progress) -> dict[str, Any]:
    """One local agent for this node's ranks."""
    from ncclcheck.bench import agent
    from ncclcheck.hostfile import Target
    from ncclcheck.remote import RemoteProcess

    if not torch_available():
        raise NcclcheckError(INSTALL_HINT)
    info = agent.hello()
    backend = choose_backend(opts.backend, [info])
    host = socket.gethostname()
    if opts.master_addr:
        check_master_addr(opts.master_addr, info["addresses"], host)
    count = plan_node(opts, info, None, host, backend, multi_node=False)
    if opts.op == "sendrecv" and count < 2:
        raise BadInput("sendrecv needs at least 2 ranks")
    master = (opts.master_addr or "127.0.0.1", opts.master_port or agent.free_port())
    spec = agent_spec(opts, backend, 0, [count], master)
    data = json.dumps(spec).encode()
    argv = [sys.executable, "-m", "ncclcheck.watchdog", "--deadline", f"{run_deadline(opts):g}",
            "--stdin-bytes", str(len(data)), "--", sys.executable, "-m", "ncclcheck.bench.agent"]
    monitor = Monitor(opts, progress, [host])
    target = Target(host="localhost")
    monitor.processes = [RemoteProcess(target, argv, data, keep_stdin_open=True,
                                       on_stdout_line=monitor.line_handler(0),
                                       on_stderr_line=monitor.stderr_handler(0))]
    doc = monitor.wait()
    doc["launch"] = {"mode": "local", "master_addr": master[0], "master_port": master[1]}
    return doc


# -- many nodes ---------------------------------------------------------------------------------
def parse_hello(stdout: str) -> dict[str, Any] | None:
    """The hello event in an agent's output (the last JSON line).

    >>> parse_hello('motd\\n{"ev": "hello", "gpus": 0}\\n')
    {'ev': 'hello', 'gpus': 0}
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("ev") == "hello":
                return event
    return None


def run_multi_node(opts: BenchOptions, progress: Progress,
                   watch: list | None = None) -> dict[str, Any]:
    """One agent per hostfile node over ssh."""
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.remote import SSH, run_all

    targets = load_hostfile(opts.hostfile, opts.nodes)
    ssh = SSH(ssh_config=opts.ssh_config, connect_timeout=opts.connect_timeout,
              remote_python=opts.remote_python)
    python = ssh.remote_python
    results = run_all(ssh, targets, [python, "-m", "ncclcheck.bench.agent", "--hello"],
                      timeout=opts.connect_timeout + 30)
    hellos: list[dict[str, Any]] = []
    problems: list[str] = []
    for target in targets:
        result = results[target.label]
        info = parse_hello(result.stdout) if result.ok else None
        if info is None:
            problems.append(result.error or f"{target.label}: no answer from the agent "
                            f"({(result.stderr.strip().splitlines() or ['?'])[-1][:200]})")
        elif not info.get("torch"):
            problems.append(f"{target.label}: {INSTALL_HINT} (for {info.get('python')})")
        hellos.append(info or {})
    if problems:
        raise NcclcheckError("; ".join(problems))
    backend = choose_backend(opts.backend, hellos)
    counts = [plan_node(opts, h, t.slots, t.label, backend, multi_node=len(targets) > 1)
              for t, h in zip(targets, hellos)]
    if opts.op == "sendrecv" and sum(counts) < 2:
        raise BadInput("sendrecv needs at least 2 ranks")
    if opts.master_addr:
        check_master_addr(opts.master_addr, hellos[0].get("addresses"), targets[0].label)
    addr = opts.master_addr or hellos[0].get("ssh_server_addr")
    if not addr or (addr.startswith("127.") and len(targets) > 1) or addr == "::1":
        raise BadInput(f"{targets[0].label}: cannot tell which address the other nodes reach "
                       "it on; pass --master-addr")
    master = (addr, opts.master_port or int(hellos[0]["free_port"]))
    labels = [t.label if h.get("hostname") in (None, t.label) else f"{t.label} ({h['hostname']})"
              for t, h in zip(targets, hellos)]
    monitor = Monitor(opts, progress, labels)
    if watch is not None:
        watch.append(monitor)
    try:
        for node, target in enumerate(targets):
            data = json.dumps(agent_spec(opts, backend, node, counts, master))
            monitor.processes.append(ssh.start(
                target, [python, "-m", "ncclcheck.bench.agent"], input=data,
                deadline=run_deadline(opts), on_stdout_line=monitor.line_handler(node),
                on_stderr_line=monitor.stderr_handler(node)))
    except BaseException:
        monitor.stop_all()
        raise
    doc = monitor.wait()
    doc["launch"] = {"mode": "ssh", "master_addr": master[0], "master_port": master[1],
                     "hosts": [t.label for t in targets]}
    return doc


# -- watching the agents ------------------------------------------------------------------------
@dataclasses.dataclass
class Failure:
    """One thing that went wrong, ranked: lower ``priority`` is more likely the cause."""

    priority: int
    message: str
    node: int | None = None  #: the node it happened on, when known


class Monitor:
    """Collects the agents' events, drives the progress bar, and decides success or failure."""

    def __init__(self, opts: BenchOptions, progress: Progress, labels: list[str]) -> None:
        self.opts, self.progress, self.labels = opts, progress, labels
        self.processes: list[Any] = []
        self.events: queue.Queue = queue.Queue()
        self.result: dict[str, Any] | None = None
        self.done_nodes: set[int] = set()
        self.failed_nodes: set[int] = set()
        self.failures: list[Failure] = []
        self.stderr_tail: dict[int, list[str]] = {}
        self.reported: set[tuple[int, Any]] = set()
        self.log_dirs: dict[int, str] = {}
        self.pair_events: list[dict[str, Any]] = []  #: bench --pairwise: each rank's pairs
        self.ready = False

    def line_handler(self, node: int) -> Callable[[str], None]:
        """A stdout callback for node ``node``'s agent (called on a drain thread)."""
        return lambda line: self.events.put((node, line))

    def stderr_handler(self, node: int) -> Callable[[str], None]:
        """A stderr callback: keep the last lines for error messages."""
        def keep(line: str) -> None:
            tail = self.stderr_tail.setdefault(node, [])
            if line.strip():
                tail.append(line.strip())
                del tail[:-20]
        return keep

    def name(self, node: int | None, event: dict[str, Any] | None = None) -> str:
        """How to name where something happened: the rank and the node's hostfile label."""
        where = self.labels[node] if node is not None and node < len(self.labels) else "?"
        if event and event.get("rank") is not None:
            return f"rank {event['rank']} on {where}"
        return where

    def handle(self, node: int, line: str) -> None:
        """One line from an agent."""
        if not line.startswith("{"):
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        kind = event.get("ev")
        if event.get("log_dir") and kind in ("started", "error", "rank_exit"):
            self.log_dirs.setdefault(node, event["log_dir"])  # kept by agents that fail
        if kind == "ready":
            self.ready = True
            self.progress.start(len(self.opts.sizes))
        elif kind == "progress":
            self.progress.update(event.get("done", 0), event.get("row", {}))
        elif kind == "result":
            self.result = event.get("doc")
        elif kind == "done":
            self.done_nodes.add(node)
        elif kind == "pair":
            self.pair_events.append(event)
        elif kind == "error":
            self.failed_nodes.add(node)
            self.reported.add((node, event.get("rank")))
            message = event.get("message", "failed")
            warn = "; ".join(event.get("nccl_warn") or [])
            text = f"{self.name(node, event)}: {message}" + (f" (NCCL WARN: {warn})" if warn else "")
            self.failures.append(Failure(3 if CONSEQUENCE_RE.search(message) else 2, text, node))
        elif kind == "rank_exit":
            self.failed_nodes.add(node)
            if (node, event.get("rank")) in self.reported:
                return  # the rank already said why
            code = int(event.get("code", 1))
            how = (f"killed by signal {-code}" if code < 0 else f"exited with code {code}")
            tail = (event.get("stderr_tail") or [""])[-1][:300]
            warn = "; ".join(event.get("nccl_warn") or [])
            text = (f"{self.name(node, event)}: rank process {how}"
                    + (f": {tail}" if tail else "") + (f" (NCCL WARN: {warn})" if warn else ""))
            self.failures.append(Failure(1 if code < 0 else 4, text, node))

    def agent_ended(self, node: int, code: int) -> None:
        """Agent ``node`` exited with ``code``."""
        from ncclcheck.remote import ssh_failure

        if code == 0 and node in self.done_nodes:
            return
        stderr = self.processes[node].stderr.text() if self.processes else ""
        label = self.labels[node]
        if code == 255:
            text = ssh_failure(label, stderr)
        elif code == 124:
            text = f"{label}: stopped by the remote deadline ({run_deadline(self.opts):g} s)"
        elif code >= 128:
            text = f"{label}: agent killed by signal {code - 128} (exit {code})"
        elif code < 0:
            text = f"{label}: agent killed by signal {-code}"
        else:
            last = (self.stderr_tail.get(node) or [""])[-1][:300]
            text = f"{label}: agent exited with code {code}" + (f": {last}" if last else "")
        if node not in self.failed_nodes:  # else its ranks' reports already say why
            self.failures.append(Failure(0, text, node))

    def wait(self) -> dict[str, Any]:
        """Watch until every agent is done (the document) or something failed (raise)."""
        last_event = time.monotonic()
        ended: set[int] = set()
        first_failure: float | None = None
        try:
            while True:
                try:
                    node, line = self.events.get(timeout=0.1)
                    self.handle(node, line)
                    last_event = time.monotonic()
                    continue_draining = True
                except queue.Empty:
                    continue_draining = False
                for node, process in enumerate(self.processes):
                    if node in ended:
                        continue
                    code = process.poll()
                    if code is not None and (process.stdout.closed or code != 0):
                        process.stdout.wait_for(r"(?!)", 0.5)  # its last lines, if any
                        self.drain()
                        ended.add(node)
                        self.agent_ended(node, code)
                now = time.monotonic()
                if self.failures and first_failure is None:
                    first_failure = now
                if first_failure is not None:
                    if now - first_failure >= FAILURE_GRACE_S or len(ended) == len(self.processes):
                        raise NcclcheckError(self.failure_message())
                    continue
                if len(ended) == len(self.processes) and self.processes:
                    if self.result is None:
                        raise NcclcheckError("rank 0 ended without a result "
                                             f"({'; '.join(self.stderr_tail.get(0, [])[-2:])})")
                    return self.result
                if continue_draining:
                    continue
                limit = (stall_limit(self.opts) if self.ready
                         else self.opts.timeout + self.opts.connect_timeout + 60)
                if now - last_event > limit:
                    phase = "the sweep" if self.ready else "start-up and rendezvous"
                    self.failures.append(Failure(6, f"no progress for {now - last_event:.0f} s "
                                                    f"during {phase} (--timeout "
                                                    f"{self.opts.timeout:g} per collective)"))
                    raise NcclcheckError(self.failure_message())
        finally:
            self.progress.stop()
            self.stop_all()

    def drain(self) -> None:
        """Handle every event already queued."""
        time.sleep(0.05)
        while True:
            try:
                node, line = self.events.get_nowait()
            except queue.Empty:
                return
            self.handle(node, line)

    def failure_message(self) -> str:
        """The most likely cause first, then what else was seen."""
        ordered = sorted(self.failures, key=lambda f: f.priority)
        seen: list[str] = []
        for failure in ordered:
            if failure.message not in seen:
                seen.append(failure.message)
        head, rest = seen[0], seen[1:4]
        text = head + (f" (also: {'; '.join(rest)})" if rest else "")
        if self.log_dirs:
            text += " [rank logs kept in " + ", ".join(
                f"{d} on {self.name(n)}" for n, d in sorted(self.log_dirs.items())) + "]"
        return text

    def stop_all(self) -> None:
        """Stop every agent still running, and wait until the nodes say they are clean.

        Closing an agent's stdin makes its node's watchdog stop the agent and its ranks and
        then exit, which ends the ssh: so a finished ssh means nothing is left on that node.
        What has not ended after :data:`STOP_WAIT_S` is terminated, then killed.
        """
        live = [p for p in self.processes if p.poll() is None]
        for process in live:
            process.close_stdin()
        end = time.monotonic() + STOP_WAIT_S
        for process in live:
            process.wait(max(0.0, end - time.monotonic()))
        for process in self.processes:
            try:
                process.stop()
            except Exception:  # noqa: BLE001 - best effort; keep stopping the others
                pass
