"""Whole-log checks that compare what NCCL chose for its RDMA devices, across devices and hosts.

* ``ib-hca-select``: NCCL's IB transport lists a device of another vendor (an Intel iWARP
  ``i40iw0``/``irdma0``, a Marvell ``qedr0``, a HiSilicon ``hns_0``, a soft ``rxe0``) beside
  ``mlx5_*`` ports, with NCCL_IB_HCA unset: NCCL spreads its rings over every device it lists;
* ``cluster-nccl-version-mismatch``: a host without a version line whose plugin-loader message
  only exists in other NCCL versions than another host's;
* ``ib-gdr-not-ready``: GPUDirect RDMA (``via NET/IB/.../GDRDMA``) used on some hosts while other
  hosts' NET/IB connections go through host memory.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ncclcheck.logparse.proc import Proc
from ncclcheck.logparse.state import LogState
from ncclcheck.logparse.version_hints import show, version_in
from ncclcheck.signatures.ib import peermem_words
from ncclcheck.judge.derived_base import _raise, plural
from ncclcheck.judge.derived_gdr import no_gdr_platform

#: RDMA device name prefix -> what it is (rdma-core provider names, as /sys/class/infiniband shows).
VENDORS = (
    ("mlx", "NVIDIA/Mellanox ConnectX"), ("i40iw", "Intel X722 iWARP"),
    ("irdma", "Intel E810/X722 iWARP/RoCE"), ("qedr", "Marvell FastLinQ"),
    ("hns", "HiSilicon RoCE"), ("bnxt_re", "Broadcom NetXtreme RoCE"), ("erdma", "Alibaba eRDMA"),
    ("rxe", "soft RoCE (rdma_rxe)"), ("siw", "soft iWARP (siw)"), ("ocrdma", "Emulex RoCE"),
    ("cxgb", "Chelsio iWARP"), ("vmw_pvrdma", "VMware paravirtual RDMA"),
)
_NAME = re.compile(r"^([a-z_]+?)_?\d")


def vendor(device: str) -> str | None:
    """The vendor family of an RDMA device name, or None for an unknown or renamed one.

    >>> vendor("mlx5_0"), vendor("i40iw1"), vendor("hns_2"), vendor("rocep1s0f0")
    ('NVIDIA/Mellanox ConnectX', 'Intel X722 iWARP', 'HiSilicon RoCE', None)
    """
    for prefix, name in VENDORS:
        if device.startswith(prefix):
            return name
    return None


def check_mixed_vendors(state: LogState) -> None:
    """``ib-hca-select``: RDMA devices of another vendor listed beside mlx5 ports."""
    mixed: list[tuple[Proc, list[str], list[str]]] = []
    for p in state.procs.values():
        if p.env.get("NCCL_IB_HCA") or not p.ib_devices:
            continue
        names = [n for n, _, _ in p.ib_devices]
        mlx = [n for n in names if n.startswith("mlx")]
        other = [n for n in names if vendor(n) and not n.startswith("mlx")]
        if mlx and other:
            mixed.append((p, mlx, other))
    if not mixed:
        return
    _, mlx, other = mixed[0]
    keep = sorted({n for _, m, _ in mixed for n in m})
    hosts = sorted({p.host or p.node or "?" for p, _, _ in mixed})
    _raise(state, "ib-hca-select",
           f"NCCL's IB transport lists {', '.join(other[:3])} ({vendor(other[0])}) beside "
           f"{', '.join(mlx[:3])} on {', '.join(hosts[:4])} ({plural(len(mixed), 'process')}), "
           "and NCCL_IB_HCA is not set",
           [p for p, _, _ in mixed], [p.evidence.get("net_ib") for p, _, _ in mixed[:3]],
           severity="warning",
           cause="Unset, NCCL_IB_HCA lets NCCL use every active RDMA port it finds, of any vendor. "
                 "An iWARP or other vendor's device (often the on-board LOM of the server) cannot "
                 "connect to the peers' ConnectX ports, so rings placed on it hang or fail, and its "
                 "bandwidth drags the whole collective down.",
           fix=f"Set NCCL_IB_HCA=={','.join(keep[:8])} on every node (exact names; the leading = "
               "needs NCCL >= 2.5), or exclude the other device with NCCL_IB_HCA=^"
               f"{other[0]}.")


def check_gdr_hosts(state: LogState) -> None:
    """``ib-gdr-not-ready``: GPUDirect RDMA on some hosts' NET/IB connections, not on others."""
    used: dict[str, list[Proc]] = defaultdict(list)
    unused: dict[str, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        host = p.host or p.node
        if not host or p.net_family() != "ib" or not p.transports.get("NET/IB"):
            continue
        (used if p.gdr_connections else unused)[host].append(p)
    without = sorted(h for h in set(unused) - set(used) if not no_gdr_platform(state, h))
    if not used or not without:
        return
    procs = [p for h in without for p in unused[h]]
    _raise(state, "ib-gdr-not-ready",
           f"GPUDirect RDMA is used on {', '.join(sorted(used)[:4])} but not on "
           f"{', '.join(without[:4])}: there, NET/IB traffic is staged through host memory "
           f"({plural(len(procs), 'process')}), and the job runs at the slower hosts' pace",
           procs, [p.evidence.get("gdr_disabled") or p.evidence.get("net_ib") for p in procs[:2]]
           + [ps[0].evidence.get("net_ib") for ps in list(used.values())[:1]],
           severity="warning", **dict(zip(("cause", "fix"), gdr_module_words(procs))))


def gdr_module_words(procs: list[Proc]) -> tuple[str, str]:
    """The peer-memory cause and fix for the NCCL version of the first process whose log says
    GPUDirect RDMA is disabled (not for distance); empty (the signature's words) when none does."""
    for p in procs:
        if "gdr_disabled" in p.evidence:
            return peermem_words(p.nccl_version or p.torch_version)
    return "", ""


def check_version_hints(state: LogState) -> None:
    """``cluster-nccl-version-mismatch`` for a host that prints no version line, when the wording
    of its plugin-loader message only exists in NCCL versions other than the one another host
    prints (:mod:`ncclcheck.logparse.version_hints`), or when two hosts' hints cannot overlap."""
    if "cluster-nccl-version-mismatch" in state.findings:
        return
    known: dict[str, set[str]] = defaultdict(set)
    hinted: dict[str, tuple[Proc, tuple[tuple[int, int], tuple[int, int]]]] = {}
    known_hints = set()
    for p in state.procs.values():
        host = p.host or p.node
        if not host:
            continue
        if p.nccl_version:
            known[host].add(p.nccl_version)
            if p.version_hint:
                if version_in(p.nccl_version, p.version_hint) is False:
                    return          # the log contradicts the table (a patched or mixed build)
                known_hints.add(p.version_hint)
        elif p.version_hint and host not in hinted:
            hinted[host] = (p, p.version_hint)
    clashes = []
    for host, (p, rng) in sorted(hinted.items()):
        if host in known or rng in known_hints:   # same wording as a host whose version shows
            continue
        others = sorted({v for h, vs in known.items() if h != host for v in vs
                         if version_in(v, rng) is False})
        if others and not any(version_in(v, rng) for h, vs in known.items() for v in vs):
            clashes.append((p, host, rng, f"NCCL {', '.join(others[:3])} on "
                            f"{', '.join(sorted(h for h, vs in known.items() if set(others) & vs)[:3])}"))
    ranges = sorted({rng for _, rng in hinted.values()})
    if not clashes and len(ranges) > 1 and ranges[0][1] < ranges[-1][0] and not known:
        lo, hi = [next((p, h) for h, (p, r) in hinted.items() if r == rng) for rng in
                  (ranges[0], ranges[-1])]
        clashes.append((lo[0], lo[1], ranges[0], f"NCCL {show(ranges[-1])} on {hi[1]}"))
        clashes.append((hi[0], hi[1], ranges[-1], f"NCCL {show(ranges[0])} on {lo[1]}"))
    if not clashes:
        return
    p, host, rng, other = clashes[0]
    _raise(state, "cluster-nccl-version-mismatch",
           f"{host} prints no NCCL version, but its plugin-loader message exists only in NCCL "
           f"{show(rng)}, while the log shows {other}",
           [c[0] for c in clashes], [c[0].evidence.get("version_hint") for c in clashes[:3]]
           + [q.evidence.get("version") for q in state.procs.values() if q.nccl_version][:1])
