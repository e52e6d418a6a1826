"""net-socket-threads: more Socket-transport threads and sockets on 25 GbE and faster links.

With the Socket transport NCCL moves each connection's data with NCCL_SOCKET_NTHREADS helper
threads of NCCL_NSOCKS_PERTHREAD sockets each (src/transport/net_socket.cc). Unset, that is one
socket and no helper thread, except on AWS ENA (2 x 8) and Google gVNIC (4 x 1) NICs, which NCCL
recognises by PCI vendor. One TCP stream rarely fills 25 Gb/s. NCCL's docs suggest 4 threads x 4
sockets for generic 100G networks; below 100G this rule uses 2 x 4. The product must stay at or
below 64 (MAX_SOCKETS): above it NCCL lowers NCCL_NSOCKS_PERTHREAD itself.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname
from ncclcheck.rules.common import configured
from ncclcheck.rules.net_socket_ifname import select
from ncclcheck.rules.net_transport import READY, UNKNOWN, ib_state, net_plugin

MIN_MBPS = 25_000
MAX_SOCKETS = 64  #: MAX_SOCKETS in src/transport/net_socket.cc
MAX_THREADS = 16  #: MAX_THREADS there: larger NCCL_SOCKET_NTHREADS values become 16
#: Drivers of NICs NCCL tunes itself (PCI vendors 0x1d0f AWS ENA, 0x1ae0 Google gVNIC).
AUTO_TUNED_DRIVERS = {"ena": "AWS ENA (NCCL uses 2 x 8)", "gve": "Google gVNIC (NCCL uses 4 x 1)"}


def threads_for(mbps: int) -> tuple[int, int]:
    """(NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD) for a link speed in Mb/s.

    >>> threads_for(25_000), threads_for(100_000), threads_for(400_000)
    ((2, 4), (4, 4), (4, 4))
    """
    return (4, 4) if mbps >= 100_000 else (2, 4)


def effective_sockets(threads: str | None, socks: str | None,
                      driver: str | None) -> tuple[int, int] | None:
    """(threads, sockets per thread) NCCL would use before its 64-socket check, when either
    variable is set (src/transport/net_socket.cc: threads above 16 become 16, an unset value
    takes the NIC's automatic one: 2 x 8 on AWS ENA, 4 x 1 on gVNIC, else 0 x 1); None when
    neither is set or a value is not a number.

    >>> effective_sockets("32", "8", None), effective_sockets(None, "40", "ena")
    ((16, 8), (2, 40))
    >>> effective_sockets(None, None, None), effective_sockets("x", "4", None)
    (None, None)
    """
    if threads is None and socks is None:
        return None
    auto = {"ena": (2, 8), "gve": (4, 1)}.get(driver or "", (0, 1))
    try:
        nt = min(int(threads), MAX_THREADS) if threads is not None else auto[0]
        ns = int(socks) if socks is not None else auto[1]
    except ValueError:
        return None
    return nt, ns


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Set threads and sockets when Socket carries the traffic over links of 25 Gb/s or more."""
    if any(net_plugin(n) or ib_state(n)[0] in (READY, UNKNOWN) for n in nodes):
        return []  # IB is (or may be) the fabric: sockets carry the data only where it fails
    sel = select(nodes)
    if not sel.names:
        return []
    ifaces = {hostname(n): {i.get("name"): i for i in fact(n, "network.interfaces", [])}
              for n in nodes}
    speeds, drivers = [], set()
    for host, names in sel.names.items():
        for name in names:
            iface = ifaces[host].get(name) or {}
            speeds.append(iface.get("speed_mbps"))
            if iface.get("driver") in AUTO_TUNED_DRIVERS:
                drivers.add(iface["driver"])
    over = {}
    for node in nodes:
        names = sel.names.get(hostname(node)) or []
        driver = next((ifaces[hostname(node)].get(n, {}).get("driver") for n in names), None)
        product = effective_sockets(configured(node, "NCCL_SOCKET_NTHREADS"),
                                    configured(node, "NCCL_NSOCKS_PERTHREAD"), driver)
        if product and product[0] * product[1] > MAX_SOCKETS:
            over[hostname(node)] = f"{product[0]} x {product[1]}"
    asked = ", ".join(f"{h}: {v}" for h, v in list(over.items())[:4])
    too_many = [Finding(
        message=(f"the configured socket threads x sockets per thread come to {asked} (after "
                 f"NCCL caps threads at {MAX_THREADS}), more than NCCL's {MAX_SOCKETS}: NCCL "
                 "lowers NCCL_NSOCKS_PERTHREAD itself and warns"),
        fix="Keep NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD <= 64.",
        severity=Severity.WARNING, evidence={"over": over}, hosts=tuple(over))] if over else []
    slowest = min((s for s in speeds if isinstance(s, int)), default=None)
    if drivers or None in speeds or slowest is None or slowest < MIN_MBPS:
        return too_many
    threads, socks = threads_for(slowest)
    return [Finding(
        message=(f"Socket carries the traffic over {slowest / 1000:g} Gb/s links: {threads} "
                 f"threads x {socks} sockets (= {threads * socks} <= {MAX_SOCKETS}) instead of "
                 "one socket per connection"
                 + (f"; the environment asks for {asked}, more than {MAX_SOCKETS}" if over else "")),
        env={"NCCL_SOCKET_NTHREADS": str(threads), "NCCL_NSOCKS_PERTHREAD": str(socks)},
        severity=Severity.WARNING if over else None,
        evidence={"network.speed_mbps": slowest, "interfaces": sel.names})]


RULE = Rule(
    id="net-socket-threads",
    title="Use several socket threads on 25 GbE and faster without IB",
    severity=Severity.INFO,
    reads=("network.interfaces", "nccl.ibverbs", "nccl.net_plugin", "ib.devices?",
           "ib.dev_infiniband?", "env.nccl?", "nccl.conf_env?"),
    sets=("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"),
    why=("NCCL's Socket transport uses NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD sockets per "
         "connection (at most 64: MAX_SOCKETS in src/transport/net_socket.cc, v2.12.12-1 to "
         "v2.30.7-1); the default is a single socket except on AWS and GCP NICs. "
         "The docs suggest 4 and 4 for generic 100G networks, because one TCP stream and one "
         "CPU thread cannot fill the link; from 25 to 100 Gb/s ncclcheck uses 2 x 4 (its own "
         "choice: measure with bench --compare)."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-nthreads",
    fix="Export the recommended NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD on every node.",
    check=check,
    scope="cluster",
)
