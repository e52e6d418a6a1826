"""Native queries: machine facts that are neither a file nor a command.

NVML calls and ``dlopen`` of libraries cannot be replayed as files, so a probe asks
``host.query(name, *args)`` and gets plain JSON back. :class:`~ncclcheck.host.live.LiveHost`
calls the function registered here; :class:`~ncclcheck.host.recorded.RecordedHost` replays the
recorded answer.

Each query is ``fn(host, *args) -> JSON``; it raises :class:`~ncclcheck.errors.QueryFailed` when it
cannot answer. Queries that load foreign libraries run them in a child process with a timeout, so
a library that crashes or hangs cannot take the probe down.
"""

from __future__ import annotations

import importlib
from typing import Any

from ncclcheck.errors import QueryFailed

#: name -> "module:function". Imported lazily: only the query that runs pays for its import.
QUERIES: dict[str, str] = {
    "nvml": "ncclcheck.native.nvml:snapshot",            # gpu: NVML answers
    "lib_versions": "ncclcheck.native.libs:lib_versions",  # nccl: ncclGetVersion per libnccl
    "python_paths": "ncclcheck.native.libs:python_paths",  # nccl: site-packages of this Python
    "verbs": "ncclcheck.native.libs:verbs",                # nccl: libibverbs + providers dlopen
    "net_addrs": "ncclcheck.native.net:net_addrs",         # network: addresses (psutil)
    "statvfs": "ncclcheck.native.fs:statvfs",              # limits: size and free of a mount
}


def call(host: Any, name: str, *args: Any) -> Any:
    """Run the registered query ``name`` against a live host."""
    target = QUERIES.get(name)
    if target is None:
        raise QueryFailed(f"unknown query {name}")
    module, _, func = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        raise QueryFailed(f"{name}: {exc}") from exc
    return fn(host, *args)
