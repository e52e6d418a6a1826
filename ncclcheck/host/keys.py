"""File-name-safe keys that commands and native queries are stored and replayed under."""

from __future__ import annotations

import json
import os
import re
from typing import Any


def command_key(argv: list[str] | tuple[str, ...]) -> str:
    """A file-name-safe key for a command, used to store and replay its output.

    >>> command_key(["nvidia-smi", "topo", "-m"])
    'nvidia-smi_topo_-m'
    >>> command_key(["ip", "-j", "addr", "show", "dev", "eth0/1"])
    'ip_-j_addr_show_dev_eth0_1'
    """
    text = "_".join(os.path.basename(argv[0]) if i == 0 else a for i, a in enumerate(argv))
    return file_key(text)


def file_key(text: str) -> str:
    """A file-name-safe form of any text.

    >>> file_key("statvfs:/dev/shm")
    'statvfs__dev_shm'
    """
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)[:150]


def query_key(name: str, args: tuple[Any, ...]) -> str:
    """The key a query's answer is stored under in a recording.

    >>> query_key("statvfs", ("/dev/shm",)), query_key("nvml", ())
    ('statvfs:/dev/shm', 'nvml')
    """
    if not args:
        return name
    if all(isinstance(a, str) for a in args):
        return f"{name}:{','.join(args)}"
    return f"{name}:{json.dumps(list(args), sort_keys=True)}"
