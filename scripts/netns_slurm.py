"""Real Slurm (Debian's slurmctld/slurmd 22.05 and munge) over a ``netns-cluster``.

Used by ``scripts/netns-cluster slurm up|down --name NAME`` and by tests/netns_cluster.py
(``slurm_cluster`` fixture). Everything lives in the cluster's state folder, ``<state>/slurm``:

* one ``munged`` for this cluster, with its own key and socket (``AuthInfo=socket=...``), so
  several clusters, or a machine's own munge, do not interfere;
* ``slurmctld`` in the root namespace, in its own UTS namespace with hostname ``ctl``, on a
  free TCP port, listening on the first link's gateway address;
* one ``slurmd`` per node, started with ``nsenter --net`` (not ``ip netns exec``, which remounts
  /sys and breaks slurmd's cgroup detection) inside its own UTS namespace named like the node;
* ``slurm.conf`` names each node with ``NodeAddr`` = its first-link address. The node names
  resolve nowhere (tasks see the root /etc/hosts), as on clusters whose node names are
  Slurm's own: only ``scontrol show node`` knows the address.

Clients need ``SLURM_CONF=<state>/slurm/slurm.conf`` (:func:`client_env`). Stopping kills the
daemons by their pid files, then munged, and waits until they are gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SLURM_CONF = """\
# Slurm for the ncclcheck netns test cluster {name}
ClusterName=ncc{name}
SlurmctldHost=ctl({ctl_addr})
SlurmctldPort={ctl_port}
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=3
MessageTimeout=10
SlurmdTimeout=60
InactiveLimit=0
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
StateSaveLocation={d}/ctld
SlurmctldPidFile={d}/ctld.pid
SlurmctldLogFile={d}/ctld.log
SlurmdSpoolDir={d}/%n
SlurmdPidFile={d}/%n.pid
SlurmdLogFile={d}/%n.log
"""

TOOLS = ("munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo")
INSTALL = "apt-get install -y slurmd slurmctld slurm-client munge"


class SlurmError(Exception):
    """Slurm could not be started; the message says why (and the daemon log's last line)."""


def missing_tools() -> list[str]:
    """The Slurm/munge programs that are not installed here."""
    paths = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [t for t in TOOLS if not shutil.which(t, path=paths)]


def slurm_dir(state_dir: str | Path) -> Path:
    """Where a cluster's Slurm files live."""
    return Path(state_dir) / "slurm"


def client_env(state_dir: str | Path, base: dict | None = None) -> dict:
    """An environment for srun/salloc/scontrol against this cluster's controller."""
    env = dict(os.environ if base is None else base)
    env["SLURM_CONF"] = str(slurm_dir(state_dir) / "slurm.conf")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "empty log"
    return "no log"


def _wait_pidfile(path: Path, log: Path, what: str, timeout: float) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        # IndexError: the daemon has made its pid file and not yet written it
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(path.read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                return pid
        time.sleep(0.05)
    raise SlurmError(f"{what} did not start within {timeout:g} s: {_tail(log)}")


def write_conf(state: dict, ctl_port: int) -> Path:
    """slurm.conf for the cluster's nodes (``NodeAddr`` = first-link address)."""
    d = slurm_dir(state["state_dir"])
    conf = SLURM_CONF.format(name=state["name"], ctl_addr=state["links"][0]["gateway"],
                             ctl_port=ctl_port, d=d)
    for node in state["nodes"]:
        conf += f"NodeName={node['name']} NodeAddr={node['addr']} CPUs={os.cpu_count() or 1} " \
                "State=UNKNOWN\n"
    conf += "PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    path = d / "slurm.conf"
    path.write_text(conf)
    return path


def start(state: dict, timeout: float = 30) -> dict:
    """Start munged, slurmctld and every node's slurmd; wait until every node is idle.

    Returns what :func:`stop` needs (also written to ``<state>/slurm/pids``).
    """
    missing = missing_tools()
    if missing:
        raise SlurmError(f"not installed: {', '.join(missing)} ({INSTALL})")
    d = slurm_dir(state["state_dir"])
    d.mkdir(mode=0o755, parents=True, exist_ok=True)
    (d / "ctld").mkdir(exist_ok=True)
    try:
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        subprocess.run(["munged", "--force", f"--socket={d}/munge.socket", f"--key-file={key}",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                        f"--seed-file={d}/munged.seed"], check=True, timeout=15,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_pidfile(d / "munged.pid", d / "munged.log", "munged", 10)
        conf = write_conf(state, free_port())
        env = client_env(state["state_dir"])
        script = 'hostname "$1" && exec "$2" -f "$3"'
        with open(d / "ctld.out", "ab") as out:
            subprocess.run(["unshare", "--uts", "sh", "-c", script, "sh", "ctl", "slurmctld",
                            str(conf)], check=True, timeout=15, stdout=out, stderr=out,
                           stdin=subprocess.DEVNULL, env=env)
        _wait_pidfile(d / "ctld.pid", d / "ctld.log", "slurmctld", 15)
        for node in state["nodes"]:
            with open(d / f"{node['name']}.out", "ab") as out:
                subprocess.run(["nsenter", f"--net=/run/netns/{node['ns']}", "unshare", "--uts",
                                "sh", "-c", 'hostname "$1" && exec "$2" -f "$3" -N "$1"', "sh",
                                node["name"], "slurmd", str(conf)], check=True, timeout=15,
                               stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env)
            _wait_pidfile(d / f"{node['name']}.pid", d / f"{node['name']}.log",
                          f"slurmd on {node['name']}", 15)
        _wait_idle(state, env, timeout)
    except subprocess.CalledProcessError as exc:
        stop(state)
        raise SlurmError(f"{exc.cmd[0]} failed ({exc.returncode}): "
                         f"{(exc.stderr or b'').decode(errors='replace').strip()}") from None
    except BaseException:
        stop(state)
        raise
    return {"conf": str(conf)}


def _wait_idle(state: dict, env: dict, timeout: float) -> None:
    names = [n["name"] for n in state["nodes"]]
    end = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < end:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=15)
        seen = proc.stdout.strip()
        states = dict(ln.split()[:2] for ln in seen.splitlines() if len(ln.split()) >= 2)
        if all(states.get(n) == "idle" for n in names):
            return
        time.sleep(0.3)
    raise SlurmError(f"nodes not idle within {timeout:g} s (sinfo: {seen!r})")


def _pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return None


def stop(state: dict, wait: float = 10) -> list[int]:
    """Stop every slurmd, slurmctld, then munged (by their pid files); idempotent."""
    d = slurm_dir(state["state_dir"])
    if not d.exists():
        return []
    files = [d / f"{n['name']}.pid" for n in state["nodes"]] + [d / "ctld.pid"]
    stopped = []
    for group in (files, [d / "munged.pid"]):
        pids = [p for p in (_pid(f) for f in group) if p]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + wait
        for pid in pids:
            while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
                time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            stopped.append(pid)
        for f in group:
            with contextlib.suppress(OSError):
                f.unlink()
    return stopped
