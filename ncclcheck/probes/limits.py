"""limits: /dev/shm, memlock and open files, the host limits NCCL trips over.

Sources (relative to the host root):
    proc/self/limits, proc/mounts (the /dev/shm mount and its size= option),
    statvfs of dev/shm (native query).

Sample content of proc/self/limits::

    Limit                     Soft Limit           Hard Limit           Units
    Max open files            1048576              1048576              files
    Max locked memory         8388608              8388608              bytes
"""

from __future__ import annotations

import re
from typing import Any, Optional, TypedDict

from ncclcheck.host import Host, QueryFailed


class LimitsData(TypedDict):
    """The ``limits`` section's data. A limit of None means unlimited."""

    shm: dict[str, Any]        # {"mounted", "fstype", "size_bytes", "free_bytes", "options"}
    memlock: dict[str, Any]    # {"soft_bytes", "hard_bytes", "unlimited"}
    open_files: dict[str, Any]  # {"soft", "hard"}


def parse_limits(text: str) -> dict[str, tuple[Optional[int], Optional[int]]]:
    """Soft and hard values of /proc/<pid>/limits, keyed by limit name; None is unlimited.

    >>> lim = parse_limits("Limit  Soft Limit  Hard Limit  Units\\n"
    ...                    "Max locked memory         65536                unlimited            bytes\\n")
    >>> lim["Max locked memory"]
    (65536, None)
    """
    out: dict[str, tuple[Optional[int], Optional[int]]] = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if not m:
            continue

        def value(v: str) -> Optional[int]:
            return int(v) if v.isdigit() else None

        out[m.group(1).strip()] = (value(m.group(2)), value(m.group(3)))
    return out


def parse_shm_mount(mounts: str) -> Optional[dict[str, Any]]:
    """The /dev/shm line of /proc/mounts, with the size= option in bytes when present.

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

    >>> parse_size("64m"), parse_size("1G"), parse_size("12345"), parse_size("50%")
    (67108864, 1073741824, 12345, None)
    """
    m = re.fullmatch(r"(\d+)([kmgt]?)", text.strip().lower())
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")


def collect(host: Host, errors: list[str]) -> LimitsData:
    """Read the limits of this process and the /dev/shm mount."""
    limits_text = host.read("proc/self/limits")
    if limits_text is None:
        errors.append("proc/self/limits unreadable")
    limits = parse_limits(limits_text or "")
    soft, hard = limits.get("Max locked memory", (None, None))
    memlock = {"soft_bytes": soft, "hard_bytes": hard,
               "unlimited": soft is None if limits_text else None}
    nofile = limits.get("Max open files", (None, None))
    mount = parse_shm_mount(host.read("proc/mounts") or "")
    shm: dict[str, Any] = {"mounted": mount is not None or host.isdir("dev/shm"),
                           "fstype": mount and mount["fstype"],
                           "options": mount and mount["options"],
                           "size_bytes": mount and mount["size_option_bytes"],
                           "free_bytes": None}
    try:
        usage = host.query("statvfs", "/dev/shm")
        shm["size_bytes"] = usage["total_bytes"]
        shm["free_bytes"] = usage["free_bytes"]
    except QueryFailed as exc:
        errors.append(str(exc))
    return LimitsData(shm=shm, memlock=memlock,
                      open_files={"soft": nofile[0], "hard": nofile[1]})
