"""What a rank learns from its own process, without torch: the gloo interface it uses, what NCCL
printed for it, the variables in effect, and its failure as one line. Used by
:mod:`~ncclcheck.bench.worker` (the only module that imports torch).
"""

from __future__ import annotations

import glob
import os
import socket
from typing import Any

from ncclcheck.bench import transport


class RankFailure(Exception):
    """A rank could not finish; the message says why in one line."""


# -- environment ---------------------------------------------------------------------------------
def choose_gloo_interface(master_addr: str) -> str | None:
    """Set ``GLOO_SOCKET_IFNAME`` for this rank: the candidate's NCCL_SOCKET_IFNAME made concrete,
    else the interface that routes to the rendezvous address. Returns the name chosen."""
    from ncclcheck.bench import ifname

    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return os.environ["GLOO_SOCKET_IFNAME"]
    spec = os.environ.get("NCCL_SOCKET_IFNAME", "")
    interfaces = ifname.local_interfaces()
    if len(spec) > 1:
        chosen = ifname.gloo_ifname(spec, interfaces)
        if chosen is None:
            raise RankFailure(f"NCCL_SOCKET_IFNAME={spec} matches no interface with an IPv4 "
                              f"address on {socket.gethostname()} "
                              f"(have: {', '.join(n for n, a in interfaces if a) or 'none'})")
    else:
        chosen = ifname.route_interface(master_addr, interfaces)
    if chosen:
        os.environ["GLOO_SOCKET_IFNAME"] = chosen
    return chosen


def own_nccl_log() -> str | None:
    """This process's NCCL debug file (``NCCL_DEBUG_FILE`` with ``%h``/``%p`` filled), if any."""
    pattern = os.environ.get("NCCL_DEBUG_FILE")
    if not pattern:
        return None
    guess = pattern.replace("%p", str(os.getpid())).replace("%h", "*")
    found = sorted(glob.glob(guess))
    return found[0] if found else None


def own_transport() -> dict[str, Any]:
    """What NCCL printed for this process, parsed (empty entry when it printed nothing)."""
    path = own_nccl_log()
    text = ""
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(8 << 20)
        except OSError:
            text = ""
    entries = transport.parse_nccl_log(text)
    entry = entries[0] if entries else transport.new_rank(socket.gethostname(), os.getpid())
    entry["log_file"] = path
    return entry


def effective_env(candidate: dict[str, str]) -> dict[str, str]:
    """NCCL, PyTorch-NCCL and gloo variables in effect in this process, plus the candidate's."""
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("NCCL_", "TORCH_NCCL_", "GLOO_"))}
    env.update({k: os.environ.get(k, v) for k, v in candidate.items()})
    return dict(sorted(env.items()))


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this rank when the agent that started it dies (PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(1)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first meaningful line of its message."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    head = next((ln for ln in lines if not ln.startswith(("Exception raised from",
                                                          "frame #"))), "")
    name = type(exc).__name__
    if name == "RankFailure" and head:  # ncclcheck's own one-line message, whole
        return head[:600]
    return f"{name}: {head[:400]}" if head else name
