"""Which NCCL versions print a given network-plugin loader message, for hosts with no version line.

A log excerpt often lacks ``NCCL version 2.x.y`` for some host (the line goes to rank 0's stdout
only, or was cut), but every rank prints how it looked for ``libnccl-net.so``, and the wording of
that message changed with NCCL releases. Checked against the source tags of
https://github.com/NVIDIA/nccl (``git grep "NET/Plugin" <tag> -- src``):

=====================================================================  ===========
message (INFO, as printed)                                             versions
=====================================================================  ===========
``NET/Plugin : No plugin found (libnccl-net.so).``                     2.4
``NET/Plugin : No plugin found (libnccl-net.so), using internal ...``  2.5 - 2.16
``NET/Plugin : No plugin found, using internal implementation``        2.17 - 2.18
``NET/Plugin : Plugin load (libnccl-net.so) returned 2 : ...``         2.17 - 2.18
``NET/Plugin : dlerror=... No plugin found (...)``                     2.19 - 2.20
``NET/Plugin: Plugin load returned 2 : ... when loading ...``          2.21
``NET/Plugin: No plugin found (libnccl-net.so)``                       2.21
``NET/Plugin: Could not find:... Using internal network plugin.``      2.22 - 2.25
``NET/Plugin: Could not find:... Using internal net plugin.``          2.26 - 2.27
``NET/Plugin: Using internal network plugin.`` (alone)                 2.21 - 2.25
=====================================================================  ===========

(src/net.cc up to v2.25.1-1, src/plugin/plugin_open.cc from v2.26.2-1.)
"""

from __future__ import annotations

import re
from typing import Optional

Range = tuple[tuple[int, int], tuple[int, int]]

#: (pattern, (lowest, highest) (major, minor)); the first pattern that matches decides.
_HINTS: tuple[tuple[re.Pattern[str], Range], ...] = tuple((re.compile(p), r) for p, r in (
    (r"^NET/Plugin : dlerror=", ((2, 19), (2, 20))),
    (r"^NET/Plugin : No plugin found, using internal", ((2, 17), (2, 18))),
    (r"^NET/Plugin : Plugin load \(", ((2, 17), (2, 18))),
    (r"^NET/Plugin : No plugin found \([^)]*\), using internal implementation", ((2, 5), (2, 16))),
    (r"^NET/Plugin : No plugin found \([^)]*\)\.\s*$", ((2, 4), (2, 4))),
    (r"^NET/Plugin: Could not find:.*Using internal network plugin\.", ((2, 22), (2, 25))),
    (r"^NET/Plugin: Could not find:.*Using internal net plugin\.", ((2, 26), (2, 27))),
    (r"^NET/Plugin: Using internal network plugin\.", ((2, 21), (2, 25))),
    (r"^NET/Plugin: (?:Most recent plugin load|Plugin load returned .* when loading)", ((2, 21), (2, 21))),
    (r"^NET/Plugin: No plugin found \(", ((2, 21), (2, 21))),
))


def plugin_version_range(msg: str) -> Optional[Range]:
    """The NCCL versions that print this ``NET/Plugin`` message, or None when it tells nothing.

    >>> plugin_version_range("NET/Plugin : No plugin found (libnccl-net.so), using internal implementation")
    ((2, 5), (2, 16))
    >>> plugin_version_range("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
    ((2, 22), (2, 25))
    >>> plugin_version_range("NET/Plugin: Using internal network plugin.")
    ((2, 21), (2, 25))
    >>> plugin_version_range("NET/Plugin: Loaded net plugin IBext (v8)") is None
    True
    """
    if not msg.startswith("NET/Plugin"):
        return None
    for pattern, rng in _HINTS:
        if pattern.search(msg):
            return rng
    return None


def version_in(version: str, rng: Range) -> Optional[bool]:
    """Whether ``2.21.5`` (or ``2.21.5+cuda12.4``) lies in ``rng``; None when unreadable.

    >>> version_in("2.21.5+cuda12.4", ((2, 21), (2, 21))), version_in("2.18.3", ((2, 19), (2, 20)))
    (True, False)
    """
    parts = version.split("+")[0].split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return rng[0] <= (int(parts[0]), int(parts[1])) <= rng[1]


def show(rng: Range) -> str:
    """``2.5-2.16``, ``2.21``."""
    lo, hi = (f"{a}.{b}" for a, b in rng)
    return lo if lo == hi else f"{lo}-{hi}"
