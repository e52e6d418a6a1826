"""Filesystem queries that no file under /proc or /sys answers."""

from __future__ import annotations

import os
from typing import Any

from ncclcheck.errors import QueryFailed
from ncclcheck.rootpaths import rel


def statvfs(host: Any, path: str) -> dict[str, Any]:
    """Size and free bytes of the filesystem holding ``path`` under the host root.

    Returns ``{"total_bytes": int, "free_bytes": int}`` (free as an unprivileged user sees it).
    """
    real = os.path.join(host.root, rel(path))
    try:
        st = os.statvfs(real)
    except OSError as exc:
        raise QueryFailed(f"statvfs {path}: {exc.strerror or exc}") from None
    return {"total_bytes": st.f_frsize * st.f_blocks, "free_bytes": st.f_frsize * st.f_bavail}
