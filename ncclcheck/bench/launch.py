"""Start the ranks and watch them: one node, many nodes over ssh, or inside a launcher.

* **Single node** (no ``--hostfile``): one local agent (:mod:`~ncclcheck.bench.agent`) under
  :mod:`ncclcheck.remote.watchdog` spawns one rank per visible GPU (NCCL), or ``--procs N`` CPU
  ranks (gloo) when there is no GPU.
* **Many nodes** (``--nodes N --hostfile FILE``): every node answers ``agent --hello`` over ssh
  first (reachable? GPUs? torch?); then one agent per node starts over the system ssh
  (:class:`ncclcheck.remote.ssh.SSH`: BatchMode, ConnectTimeout, ``~/.ssh/config`` or ``-F``), with
  the same interpreter path as this one unless ``--remote-python``. Rank 0 hosts the
  torch.distributed TCPStore on the first node, at the address ssh reached that node on
  (``--master-addr``/``--master-port`` override it).
* **Inside a launcher** (torchrun, srun, mpirun, DeepSpeed): :func:`run_in_launcher` runs this
  process as the rank it was given and spawns nothing.
* **Through Slurm** (``--launcher slurm``, the default inside salloc/sbatch without
  ``--hostfile``): :func:`ncclcheck.remote.slurm.bench_via_srun` starts one rank per node with srun.

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
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

from ncclcheck.bench.environ import nccl_debug_env, rank_env, rendezvous
from ncclcheck.bench.formulas import OPS
from ncclcheck.bench.monitor import Monitor
from ncclcheck.bench.options import (
    INSTALL_HINT,
    BenchOptions,
    Progress,
    run_deadline,
    torch_available,
)
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.k8s.launcher import detect_launcher
from ncclcheck.remote.slurm import bench_via_srun, in_allocation


def run(opts: BenchOptions, progress: Progress | None = None,
        watch: list | None = None, session: Any = None) -> dict[str, Any] | None:
    """Run the bench as asked; the bench document (None on a non-zero rank in a launcher).
    Over ssh, the :class:`Monitor` is appended to ``watch`` (when given) before anything starts,
    so a caller can read what it saw when the run fails (``bench --pairwise`` goes on), and the
    agents of ``session`` (a :class:`~ncclcheck.bench.session.Session`, for runs of one
    hostfile) run it when given."""
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
        return run_multi_node(opts, progress, watch, session)
    if opts.nodes not in (None, 1):
        raise BadInput("--nodes needs --hostfile")
    return run_single_node(opts, progress)


# -- inside a launcher ------------------------------------------------------------------------
def run_in_launcher(opts: BenchOptions, launcher: str, progress: Progress) -> dict | None:
    """Act as the rank torchrun/srun/mpirun/DeepSpeed started; rank 0 returns the document."""
    if not torch_available():
        raise NcclcheckError(INSTALL_HINT)
    environ = dict(os.environ)
    ident = rank_env(environ, launcher)
    if launcher == "mpi" and not opts.master_addr:
        from ncclcheck.bench.mpiaddr import master_address

        found = master_address(environ)
        if found:
            environ["MASTER_ADDR"] = found
    ident["master_addr"], ident["master_port"] = rendezvous(
        environ, launcher, opts.master_addr, opts.master_port)
    where = f"rank {ident['rank']} on {socket.gethostname()}"
    _check_address_before_torch(ident, environ, where)
    made_log_dir = not opts.nccl_log_dir
    log_dir = opts.nccl_log_dir or tempfile.mkdtemp(prefix="ncclcheck-bench-")
    os.makedirs(log_dir, exist_ok=True)
    os.environ.update(opts.candidate_env)
    os.environ.update(nccl_debug_env(dict(os.environ), log_dir))
    from ncclcheck.bench.rankio import library_output_to

    kept = f" [rank logs kept in {log_dir}]"
    try:
        with library_output_to(os.path.join(log_dir, f"rank.{ident['rank']}.stderr")):
            doc = _run_this_rank(opts, ident, progress)
    except NcclcheckError as exc:
        raise NcclcheckError(f"{where}: {exc}{kept}") from None
    except Exception as exc:  # noqa: BLE001 - a collective or rendezvous failure: one line
        from ncclcheck.bench.rankenv import one_line

        raise NcclcheckError(f"{where}: {one_line(exc)}{kept}") from None
    finally:
        progress.stop()
    if made_log_dir:  # success: the rank read its log already
        shutil.rmtree(log_dir, ignore_errors=True)
    if doc is not None:
        doc["launch"] = {"mode": launcher, "master_addr": ident["master_addr"],
                         "master_port": ident["master_port"]}
    return doc


def _check_address_before_torch(ident: dict[str, Any], environ: dict[str, str],
                                where: str) -> None:
    """Resolve the rendezvous address (and check it is rank 0's own) before this rank imports
    torch, the seconds of its start, and before it has logs: a wrong address fails at once,
    named ``where``. The rank's rendezvous takes the answer (``master_resolved``), so a name is
    looked up once."""
    from ncclcheck.bench import meet

    try:
        ident["master_resolved"] = meet.check_address(str(ident["master_addr"] or "127.0.0.1"),
                                                      int(ident["rank"]), environ)
    except meet.RendezvousError as exc:
        raise NcclcheckError(f"{where}: {exc}") from None


def _run_this_rank(opts: BenchOptions, ident: dict[str, Any], progress: Progress) -> dict | None:
    """Import torch and run the sweep as this rank (library output already goes to its log)."""
    from ncclcheck.bench import worker
    from ncclcheck.bench.rankenv import RankFailure

    backend = opts.backend
    if backend == "auto":
        backend = "nccl" if worker.torch.cuda.is_available() else "gloo"

    def emit(event: dict[str, Any]) -> None:
        if event.get("ev") == "ready":
            progress.start(event.get("sizes", len(opts.sizes)))
        elif event.get("ev") == "progress":
            progress.update(event["done"], event["row"])
        elif event.get("ev") == "beat" and "round" in event and hasattr(progress, "round"):
            progress.round(event)

    try:
        return worker.run_rank(opts.worker_spec(backend), ident, emit)
    except RankFailure as exc:
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



# -- single node --------------------------------------------------------------------------------
def run_single_node(opts: BenchOptions, progress: Progress) -> dict[str, Any]:
    """One local agent for this node's ranks."""
    from ncclcheck.bench import agent
    from ncclcheck.hostfile import Target
    from ncclcheck.remote.process import RemoteProcess

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
    argv = [sys.executable, "-m", "ncclcheck.remote.watchdog",
            "--deadline", f"{run_deadline(opts):g}", "--stdin-bytes", str(len(data)), "--", sys.executable, "-m", "ncclcheck.bench.agent"]
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


def hello_timeout(opts: BenchOptions) -> float:
    """How long the nodes' start-up check (``agent --hello`` over ssh) may take: ssh's connect
    timeout and 30 s, within the caller's ``deadline_s`` (tune: what is left of its --budget),
    which the run then gets less what the check took.

    >>> opts = BenchOptions(connect_timeout=10)
    >>> hello_timeout(opts), hello_timeout(dataclasses.replace(opts, deadline_s=6.5))
    (40, 6.5)
    """
    own = opts.connect_timeout + 30
    return own if opts.deadline_s is None else max(1.0, min(own, opts.deadline_s))


def say_hello(opts: BenchOptions, targets: list, session: Any = None
              ) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Every node's hello (or None) and what went wrong there (or None): ``agent --hello``
    over ssh, or ``session``'s agents."""
    from ncclcheck.remote.ssh import SSH, run_all

    if session is not None:
        return session.hello(hello_timeout(opts))
    ssh = SSH(ssh_config=opts.ssh_config, connect_timeout=opts.connect_timeout,
              remote_python=opts.remote_python)
    results = run_all(ssh, targets, [ssh.remote_python, "-m", "ncclcheck.bench.agent",
                                     "--hello"], timeout=hello_timeout(opts))
    out: list[tuple[dict[str, Any] | None, str | None]] = []
    for target in targets:
        result = results[target.label]
        info = parse_hello(result.stdout) if result.ok else None
        out.append((info, None if info is not None else result.error or (
            f"{target.label}: no answer from the agent "
            f"({(result.stderr.strip().splitlines() or ['?'])[-1][:200]})")))
    return out


def run_multi_node(opts: BenchOptions, progress: Progress, watch: list | None = None,
                   session: Any = None) -> dict[str, Any]:
    """One agent per hostfile node over ssh (``session``'s, when given)."""
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.remote.ssh import SSH

    targets = session.targets if session is not None else load_hostfile(opts.hostfile,
                                                                         opts.nodes)
    ssh = SSH(ssh_config=opts.ssh_config, connect_timeout=opts.connect_timeout,
              remote_python=opts.remote_python)
    python = ssh.remote_python
    started = time.monotonic()
    answers = say_hello(opts, targets, session)
    if opts.deadline_s is not None:   # the start-up check counts against the caller's cap
        opts = dataclasses.replace(opts, deadline_s=max(
            1.0, opts.deadline_s - (time.monotonic() - started)))
    hellos: list[dict[str, Any]] = []
    problems: list[str] = []
    for target, (info, problem) in zip(targets, answers):
        if info is None:
            problems.append(problem or f"{target.label}: no answer from the agent")
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
    monitor.kept = session is not None
    if watch is not None:
        watch.append(monitor)
    try:
        for node, target in enumerate(targets):
            spec = agent_spec(opts, backend, node, counts, master)
            if session is not None:
                monitor.processes.append(session.run(node, spec, monitor.line_handler(node),
                                                     monitor.stderr_handler(node)))
                continue
            monitor.processes.append(ssh.start(
                target, [python, "-m", "ncclcheck.bench.agent"], input=json.dumps(spec),
                deadline=run_deadline(opts), on_stdout_line=monitor.line_handler(node),
                on_stderr_line=monitor.stderr_handler(node)))
    except BaseException:
        monitor.stop_all()
        raise
    doc = monitor.wait()
    doc["launch"] = {"mode": "ssh", "master_addr": master[0], "master_port": master[1],
                     "hosts": [t.label for t in targets]}
    links = {t.label: h["links"] for t, h in zip(targets, hellos) if h.get("links")}
    if links:  # the rates tc shapes the nodes' links to (ncclcheck.expected)
        doc["launch"]["links"] = links
    return doc
