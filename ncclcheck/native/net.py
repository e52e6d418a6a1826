"""The ``net_addrs`` query: interface addresses as the running kernel reports them.

Linux has no ``/proc`` file listing IPv4 addresses (they live behind netlink), so the network
probe asks this query. It wraps ``psutil.net_if_addrs()`` (``getifaddrs(3)``) and answers plain
JSON, which a recording stores as ``queries/net_addrs.json``::

    {"source": "psutil 7.2.2",
     "addrs": {"eth0": [{"family": "inet", "address": "192.0.2.2", "netmask": "255.255.255.0",
                          "broadcast": "192.0.2.255", "ptp": null},
                         {"family": "inet6", "address": "fe80::fc:ff:fe00:1%eth0",
                          "netmask": "ffff:ffff:ffff:ffff::", "broadcast": null, "ptp": null}]}}

Link-layer (``AF_PACKET``) entries are left out: the MAC address comes from sysfs. The answer
describes the network namespace this process runs in, whatever the host's root is.
"""

from __future__ import annotations

import socket
from typing import Any

from ncclcheck.errors import QueryFailed

_FAMILIES = {socket.AF_INET: "inet", socket.AF_INET6: "inet6"}


def net_addrs(host: Any) -> dict[str, Any]:
    """IPv4 and IPv6 addresses of every interface, from ``psutil.net_if_addrs()``.

    Raises:
        QueryFailed: psutil is missing or the call failed.
    """
    try:
        import psutil
    except ImportError as exc:  # psutil is a dependency, but a broken install must not crash
        raise QueryFailed(f"net_addrs: psutil unavailable: {exc}") from exc
    try:
        raw = psutil.net_if_addrs()
    except OSError as exc:
        raise QueryFailed(f"net_addrs: psutil.net_if_addrs failed: {exc}") from exc
    addrs: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(raw):
        entries = []
        for snic in raw[name]:
            family = _FAMILIES.get(snic.family)
            if family is None:
                continue
            entries.append({"family": family, "address": snic.address, "netmask": snic.netmask,
                            "broadcast": snic.broadcast, "ptp": snic.ptp})
        addrs[name] = entries
    return {"source": f"psutil {psutil.__version__}", "addrs": addrs}
