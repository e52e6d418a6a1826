"""Run through Slurm: inside an allocation (``salloc``/``sbatch``), ``srun`` starts the per-node
work instead of ssh.

* ``probe --launcher slurm``: one ``ncclcheck probe --json`` task per node of the allocation
  (``srun --ntasks-per-node 1 --label``); each task's output is read back through srun (no
  shared filesystem needed) into the same cluster document the ssh fan-out builds. A node whose
  task fails or prints no facts is listed in ``failed`` with its last stderr line; the healthy
  nodes are kept.
* ``bench --launcher slurm``: one rank per node under ``srun --kill-on-bad-exit 1``, running
  :mod:`ncclcheck.bench.slurmrank` with this run's options; rank 0 prints the document.

The default launcher (:func:`default_launcher`) is ``slurm`` inside an allocation and outside
a job step, when no ``--hostfile`` (or ``--from``) is given; ``ssh`` otherwise. Variables read:
``SLURM_JOB_ID``, ``SLURM_STEP_ID`` (set inside ``srun``: then this process is one task),
``SLURM_JOB_NODELIST``, ``SLURM_JOB_NUM_NODES``.

Nothing hangs: srun runs under a deadline; past it srun gets SIGINT twice (which cancels the
step on every node), then SIGKILL.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from typing import Any

from ncclcheck.errors import BadInput, NcclcheckError

LABEL_RE = re.compile(r"^\s*(\d+): ?(.*)$")
STOP_WAIT_S = 10.0


def in_allocation(environ: dict[str, str]) -> bool:
    """Inside salloc/sbatch but not inside a job step (where this process is one task).

    >>> job, step = {"SLURM_JOB_ID": "7"}, {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    >>> in_allocation(job), in_allocation(step)
    (True, False)
    """
    return bool(environ.get("SLURM_JOB_ID")) and not environ.get("SLURM_STEP_ID")


def default_launcher(environ: dict[str, str], hostfile: str | None) -> str:
    """``slurm`` inside an allocation without a hostfile, else ``ssh``.

    >>> default_launcher({"SLURM_JOB_ID": "7"}, None), default_launcher({"SLURM_JOB_ID": "7"}, "h")
    ('slurm', 'ssh')
    """
    return "slurm" if in_allocation(environ) and not hostfile else "ssh"


def choose_launcher(launcher: str | None, hostfile: str | None, from_paths: list[str],
                    root: str = "/", replay: str | None = None,
                    environ: dict[str, str] | None = None) -> str | None:
    """``probe``'s launcher: as asked, else ``slurm`` inside salloc/sbatch when no hostfile,
    files, ``--root`` or ``--replay`` say otherwise (see :mod:`ncclcheck.remote.slurm`), else None.

    >>> choose_launcher(None, None, [], environ={"SLURM_JOB_ID": "3"})
    'slurm'
    >>> choose_launcher(None, "hosts", [], environ={"SLURM_JOB_ID": "3"}) is None
    True
    """
    if launcher == "slurm" and (hostfile or from_paths or replay or root != "/"):
        raise BadInput("--launcher slurm probes the allocation's nodes; drop --hostfile, --from, "
                       "--root and --replay")
    if launcher:
        return launcher
    local_only = hostfile or from_paths or replay or root != "/"
    return "slurm" if not local_only and in_allocation(dict(environ or os.environ)) else None


def expand_nodelist(text: str) -> list[str]:
    """Every host of a Slurm node list, in order (as ``scontrol show hostnames``).

    >>> expand_nodelist("node[01-03,07],gpu-a,r[1-2]n[1-2]")
    ['node01', 'node02', 'node03', 'node07', 'gpu-a', 'r1n1', 'r1n2', 'r2n1', 'r2n2']
    """
    out: list[str] = []
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text.strip()):
        names = [""]
        for literal, ranges in re.findall(r"([^\[]*)(?:\[([^\]]*)\])?", item):
            names = [n + literal for n in names]
            if ranges:
                parts = []
                for part in ranges.split(","):
                    lo, _, hi = part.partition("-")
                    if not lo.isdigit() or (hi and not hi.isdigit()):
                        raise BadInput(f"SLURM_JOB_NODELIST={text!r}: cannot read {part!r}")
                    parts += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi or lo) + 1)]
                names = [n + p for n in names for p in parts]
        out.extend(n for n in names if n)
    return out


def allocation_nodes(environ: dict[str, str]) -> list[str]:
    """The allocation's nodes; BadInput outside one."""
    if not in_allocation(environ):
        raise BadInput("--launcher slurm needs an allocation: run inside salloc or sbatch "
                       "(SLURM_JOB_ID set, outside srun)")
    if not shutil.which("srun"):
        raise BadInput("--launcher slurm: srun not found on PATH")
    nodes = expand_nodelist(environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST", ""))
    if not nodes:
        raise BadInput("--launcher slurm: SLURM_JOB_NODELIST is empty")
    return nodes


def srun_argv(nodes: int, argv: list[str], kill_on_bad_exit: bool, name: str,
              seconds: float) -> list[str]:
    """srun, one task per node, labelled output, a step time limit.

    >>> srun_argv(2, ["python3", "-m", "ncclcheck", "probe", "--json"], False, "p", 90)[:8]
    ['srun', '--nodes', '2', '--ntasks', '2', '--ntasks-per-node', '1', '--label']
    """
    minutes = max(1, int(seconds // 60) + 1)
    return ["srun", "--nodes", str(nodes), "--ntasks", str(nodes), "--ntasks-per-node", "1",
            "--label", f"--kill-on-bad-exit={1 if kill_on_bad_exit else 0}", "--job-name", name,
            f"--time={minutes}", "--input=none", "--"] + argv


def run_srun(argv: list[str], timeout: float, env: dict[str, str] | None = None
             ) -> tuple[int, str, str]:
    """Run srun to completion or ``timeout`` s; (exit code, stdout, stderr). Past the deadline
    the step is cancelled on every node (SIGINT twice), then srun is killed; code 124."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    except OSError as exc:
        raise NcclcheckError(f"cannot run srun: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        threading.Event().wait(0.3)
        proc.send_signal(signal.SIGINT)  # the second ^C within a second cancels the step
        try:
            out, err = proc.communicate(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return 124, out, err + f"\nsrun: stopped after {timeout:g} s"


def split_labelled(text: str) -> dict[int, list[str]]:
    """Lines of ``srun --label`` output by task id.

    >>> dict(split_labelled("0: {\\n1: oops\\n0: }\\nsrun: error\\n"))
    {0: ['{', '}'], 1: ['oops']}
    """
    out: dict[int, list[str]] = defaultdict(list)
    for line in text.splitlines():
        match = LABEL_RE.match(line)
        if match:
            out[int(match.group(1))].append(match.group(2))
    return out


def bench_via_srun(opts: Any, environ: dict[str, str], timeout: float) -> dict[str, Any]:
    """``bench --launcher slurm``: one rank per node; rank 0's bench document."""
    import dataclasses
    import json

    from ncclcheck.schema import split_documents

    nodes = allocation_nodes(environ)
    if opts.nodes:
        nodes = nodes[:opts.nodes]
    env = dict(environ)
    env["NCCLCHECK_BENCH_OPTIONS"] = json.dumps(dataclasses.asdict(opts))
    python = opts.remote_python or sys.executable
    argv = srun_argv(len(nodes), [python, "-m", "ncclcheck.bench.slurmrank"], True,
                     "ncclcheck-bench", timeout)
    code, out, err = run_srun(argv, timeout, env=env)
    text = "\n".join(split_labelled(out).get(0, []))
    docs = [d for d in (split_documents(text, "rank 0") if text.strip() else [])
            if isinstance(d, dict)]
    if code == 0 and docs:
        return docs[-1]
    per_task = split_labelled(err)
    lines = [ln.split("ncclcheck: error:", 1)[1].strip() for t in sorted(per_task)
             for ln in per_task[t] if "ncclcheck: error:" in ln]
    lines += [f"{nodes[t] if t < len(nodes) else t}: {per_task[t][-1].strip()}"
              for t in sorted(per_task) if per_task[t] and not lines]
    lines = lines or [ln for ln in err.splitlines() if ln.strip()][-1:] or ["no output"]
    lines.sort(key=lambda ln: bool(re.search(r"CANCELLED|Killed|Terminated", ln)))  # consequences
    raise NcclcheckError(f"srun on {','.join(nodes)}: {lines[0][:600]}"
                         + (f" (also: {'; '.join(x[:200] for x in lines[1:3])})"
                            if len(lines) > 1 else ""))
