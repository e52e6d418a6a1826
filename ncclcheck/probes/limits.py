"""limits: /dev/shm, memlock and open files, the host limits NCCL trips over.

Sources (relative to the host root):
    proc/self/limits, proc/self/status (CapEff: whether this process has CAP_IPC_LOCK),
    proc/mounts (the /dev/shm mount and its size= option), statvfs of dev/shm (native query),
    etc/systemd/logind.conf and the logind.conf.d drop-ins (RemoveIPC), whether
    systemd-logind is installed.

RDMA memory registration (``ibv_reg_mr``) pins pages against RLIMIT_MEMLOCK unless the process
has CAP_IPC_LOCK (Linux drivers/infiniband/core/umem.c ``ib_umem_get``), so both are reported.

Sample content of proc/self/limits::

    Limit                     Soft Limit           Hard Limit           Units
    Max open files            1048576              1048576              files
    Max locked memory         8388608              8388608              bytes
"""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host


class LimitsData(TypedDict):
    """The ``limits`` section's data. A limit of None means unlimited."""

    shm: dict[str, Any]        # {"mounted", "fstype", "size_bytes", "free_bytes", "options"};
                               # mounted: /dev/shm exists (None: unknown)
    memlock: dict[str, Any]    # {"soft_bytes", "hard_bytes", "unlimited", "cap_ipc_lock"}
    open_files: dict[str, Any]  # {"soft", "hard"}
    remove_ipc: dict[str, Any]  # {"logind", "value", "source"}: systemd-logind's RemoveIPC


def parse_limits(text: str) -> dict[str, tuple[Optional[int], Optional[int]]]:
    """Soft and hard values of /proc/<pid>/limits, keyed by limit name; None is unlimited.

    Recorded in a Docker container started without ``--ulimit memlock`` (lines cut)::

        Limit                     Soft Limit           Hard Limit           Units
        Max open files            1048576              1048576              files
        Max locked memory         65536                65536                bytes
        Max nice priority         0                    0

    >>> lim = parse_limits(
    ...     "Limit                     Soft Limit           Hard Limit           Units     \\n"
    ...     "Max open files            1048576              1048576              files     \\n"
    ...     "Max locked memory         65536                65536                bytes     \\n"
    ...     "Max stack size            8388608              unlimited            bytes     \\n")
    >>> lim["Max locked memory"], lim["Max stack size"], lim["Max open files"]
    ((65536, 65536), (8388608, None), (1048576, 1048576))
    >>> parse_limits("Limit\\nMax locked memory         lots                 ?\\n")  # unknown
    {}
    """
    out: dict[str, tuple[Optional[int], Optional[int]]] = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if not m or not all(v.isdigit() or v == "unlimited" for v in m.group(2, 3)):
            continue  # garbage is unknown, not unlimited
        soft, hard = (int(v) if v.isdigit() else None for v in m.group(2, 3))
        out[m.group(1).strip()] = (soft, hard)
    return out


#: Bit of CAP_IPC_LOCK in the capability sets of /proc/<pid>/status (linux/capability.h).
CAP_IPC_LOCK = 14


def parse_cap_ipc_lock(text: str) -> Optional[bool]:
    """Whether the ``CapEff`` set of /proc/<pid>/status holds CAP_IPC_LOCK; None if unknown.

    Recorded in this project's Debian container (root, most capabilities), and Docker's default
    set (``docker run`` without ``--cap-add=IPC_LOCK``):

    >>> parse_cap_ipc_lock("CapInh:\\t0000000000000000\\nCapPrm:\\t000001fffeffffff\\n"
    ...                    "CapEff:\\t000001fffeffffff\\n")
    True
    >>> parse_cap_ipc_lock("CapEff:\\t00000000a80425fb\\n")
    False
    >>> parse_cap_ipc_lock("garbage"), parse_cap_ipc_lock("CapEff:\\tzz\\n")
    (None, None)
    """
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", text, re.M)
    return bool(int(m.group(1), 16) >> CAP_IPC_LOCK & 1) if m else None


def parse_shm_mount(mounts: str) -> Optional[dict[str, Any]]:
    """The /dev/shm line of /proc/mounts, with the size= option in bytes when present.

    Recorded in a Docker container started without ``--shm-size`` (Docker's 64 MiB default)::

        overlay / overlay rw,relatime 0 0
        shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0

    >>> parse_shm_mount("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\\n")
    {'fstype': 'tmpfs', 'options': ['rw', 'nosuid', 'nodev', 'noexec', 'relatime', 'size=65536k'], 'size_option_bytes': 67108864}
    >>> parse_shm_mount("proc /proc proc rw 0 0") is None
    True
    """
    found = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "/dev/shm":
            found = parts  # the last mount on a path is the visible one
    if not found:
        return None
    options = found[3].split(",")
    size = next((parse_size(o[5:]) for o in options if o.startswith("size=")), None)
    return {"fstype": found[2], "options": options, "size_option_bytes": size}


def parse_size(text: str) -> Optional[int]:
    """A tmpfs size option (``65536k``, ``1g``, ``1073741824``) in bytes.

    Recorded: ``size=65536k`` (Docker's default), ``size=1048576k`` (``--shm-size=1g``).

    >>> parse_size("64m"), parse_size("1G"), parse_size("12345"), parse_size("50%")
    (67108864, 1073741824, 12345, None)
    """
    m = re.fullmatch(r"(\d+)([kmgt]?)", text.strip().lower())
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")


LOGIND_BINARIES = ("usr/lib/systemd/systemd-logind", "lib/systemd/systemd-logind")
LOGIND_STATE = "run/systemd/system"
LOGIND_DROPINS = ("usr/lib/systemd/logind.conf.d", "usr/local/lib/systemd/logind.conf.d",
                  "etc/systemd/logind.conf.d", "run/systemd/logind.conf.d")


def parse_remove_ipc(text: Optional[str]) -> Optional[bool]:
    """The ``RemoveIPC=`` of a logind.conf text's ``[Login]`` section; None when not set.

    The NCCL troubleshooting page's fix, and systemd's commented default:

    >>> parse_remove_ipc("[Login]\\n#RemoveIPC=yes\\nRemoveIPC=no\\n")
    False
    >>> parse_remove_ipc("[Login]\\n#RemoveIPC=yes\\n"), parse_remove_ipc(None)
    (None, None)
    """
    found, section = None, ""
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Login]" and line.startswith("RemoveIPC="):
            value = line.split("=", 1)[1].strip().lower()
            found = value in ("yes", "true", "1", "on")
    return found


def remove_ipc(host: Host) -> dict[str, Any]:
    """systemd-logind's effective RemoveIPC: logind.conf, then its drop-ins by name (the last
    setting wins, systemd's order); systemd's default is yes (logind.conf(5)). ``logind`` is
    whether logind is installed and systemd runs the machine (/run/systemd/system, what
    sd_booted(3) checks): in a container that does not run it, the host's logind does not reach
    the container's IPC."""
    logind = any(host.exists(p) for p in LOGIND_BINARIES) and host.isdir(LOGIND_STATE)
    value, source = None, None
    files = ["etc/systemd/logind.conf"]
    names: dict[str, str] = {}
    for folder in LOGIND_DROPINS:
        for name in host.listdir(folder):
            if name.endswith(".conf"):
                names[name] = f"{folder}/{name}"
    files += [names[n] for n in sorted(names)]
    for path in files:
        got = parse_remove_ipc(host.read(path))
        if got is not None:
            value, source = got, "/" + path
    if value is None and logind:
        value, source = True, "systemd default"
    return {"logind": logind, "value": value if logind else None, "source": source}


def collect(host: Host, errors: list[str]) -> LimitsData:
    """Read the limits of this process and the /dev/shm mount."""
    limits_text = host.read("proc/self/limits")
    if limits_text is None:
        errors.append("proc/self/limits unreadable")
    limits = parse_limits(limits_text or "")
    lock = limits.get("Max locked memory")
    soft, hard = lock or (None, None)
    memlock = {"soft_bytes": soft, "hard_bytes": hard,
               "unlimited": (soft is None) if lock else None,
               "cap_ipc_lock": parse_cap_ipc_lock(host.read("proc/self/status") or "")}
    nofile = limits.get("Max open files", (None, None))
    mounts = host.read("proc/mounts")
    mount = parse_shm_mount(mounts or "")
    shm: dict[str, Any] = {"mounted": mount is not None or host.isdir("dev/shm") or None,
                           "fstype": mount and mount["fstype"],
                           "options": mount and mount["options"],
                           "size_bytes": mount and mount["size_option_bytes"],
                           "free_bytes": None}
    try:
        usage = host.query("statvfs", "/dev/shm")
    except QueryFailed as exc:
        errors.append(str(exc))
        usage = None
    if isinstance(usage, dict) and all(isinstance(usage.get(k), int)
                                       for k in ("total_bytes", "free_bytes")):
        shm.update(mounted=True, size_bytes=usage["total_bytes"], free_bytes=usage["free_bytes"])
    elif usage is not None:
        errors.append("statvfs /dev/shm: the answer has no total_bytes/free_bytes")
    if shm["mounted"] is None and mounts is not None and usage is None:
        shm["mounted"] = False  # /proc/mounts has no /dev/shm and there is no such directory
    ipc = remove_ipc(host)
    return LimitsData(shm=shm, memlock=memlock,
                      open_files={"soft": nofile[0], "hard": nofile[1]}, remove_ipc=ipc)
