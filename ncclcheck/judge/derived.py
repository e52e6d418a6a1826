"""Whole-log checks: what no single line says, but the ranks together do.

They run once, after the last line, over :class:`~ncclcheck.logparse.state.LogState`:

* ranks that disagree on the NCCL version, the CUDA driver or the network transport;
* a virtual or loopback interface used between nodes (``net-socket-ifname``);
* RDMA hardware in sight while NCCL runs over sockets (libibverbs missing, no usable device);
* GPUDirect RDMA disabled on the HCAs in use;
* debugging/tuning variables NCCL reports as set (``env-debug-vars-set``, info only);
* a collective that timed out on one node after every rank finished init, over P2P and with no
  NCCL error: the PCIe ACS/IOMMU signature (``gpu-p2p-unsupported``);
* ``fork()`` running out of memory, reported only when the job runs over EFA;
* ranks that started init and never completed it while others did;
* the fallback "an NCCL call failed" and the info-level list of unrecognised WARN lines, only
  when nothing more specific explains the log.

Each check is conservative: it needs positive evidence in the log (two hosts, an RDMA device
name, an Init START) before it says anything, because an invented problem is worse than none.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from ncclcheck.envformat import DEBUG_VARS
from ncclcheck.judge.derived_base import (
    _by_host,
    _raise,
    multi_node,
    plural,
)
from ncclcheck.judge.derived_gdr import check_gdr_unseen, without_gdr_by_design
from ncclcheck.judge.derived_p2p import check_bad_address_after_init
from ncclcheck.judge.derived_hosts import (
    check_gdr_hosts,
    gdr_module_words,
    check_mixed_vendors,
    check_version_hints,
)
from ncclcheck.logparse.proc import Proc
from ncclcheck.logparse.state import LogState
from ncclcheck.signatures.interface import (
    LOCAL_ADDRESS,
    VIRTUAL_IFACE,
    socket_ifname_fix,
    why_wrong,
)


def check_versions(state: LogState) -> None:
    """``cluster-nccl-version-mismatch``: more than one NCCL version among the ranks."""
    by_version: dict[str, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        if p.nccl_version:
            by_version[p.nccl_version].append(p)
    versions = set(by_version) | set(state.bare_versions)
    if len(versions) < 2:
        return
    parts = []
    for v in sorted(versions):
        hosts = sorted({p.host or p.node or "?" for p in by_version.get(v, [])})
        parts.append(f"{v} ({', '.join(hosts[:4]) or 'host unknown'}"
                     f"{', ...' if len(hosts) > 4 else ''})")
    _raise(state, "cluster-nccl-version-mismatch",
           "ranks report different NCCL versions: " + "; ".join(parts),
           [p for ps in by_version.values() for p in ps],
           [state.bare_versions.get(v) for v in sorted(versions)])


def check_drivers(state: LogState) -> None:
    """``cluster-driver-version-mismatch``: ranks report different ``cudaDriverVersion``."""
    by_driver: dict[int, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        if p.cuda_driver is not None:
            by_driver[p.cuda_driver].append(p)
    if len(by_driver) < 2:
        return
    parts = [f"{v // 1000}.{v % 1000 // 10} ({_by_host(ps)})" for v, ps in sorted(by_driver.items())]
    _raise(state, "cluster-driver-version-mismatch",
           "ranks run on different NVIDIA drivers (the CUDA version each driver supports, from "
           "cudaDriverVersion): " + "; ".join(parts),
           [p for ps in by_driver.values() for p in ps],
           [ps[0].evidence.get("cuda_driver") for _, ps in sorted(by_driver.items())])


def check_transports(state: LogState) -> None:
    """``net-transport``: ranks of a multi-node job on different network transports."""
    by_family: dict[str, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        fam = p.net_family()
        if fam:
            by_family[fam].append(p)
    if len(by_family) < 2:
        return
    parts = [f"{fam} on {', '.join(sorted({p.host or p.node or '?' for p in ps})[:4])}"
             for fam, ps in sorted(by_family.items())]
    _raise(state, "net-transport",
           "ranks chose different network transports: " + "; ".join(parts),
           [p for ps in by_family.values() for p in ps],
           [ps[0].evidence.get("network") or ps[0].evidence.get("net_socket")
            for ps in by_family.values()])


def _bad(name: str, addr: str) -> bool:
    """Whether ``name:addr`` cannot carry traffic to another node. A veth with a routable address
    is a container's own way out (``veth0`` in a pod), not the host's end of a pair.

    >>> _bad("vethe94aab9", "fe80::a86b:69ff:fe67:e3fe%vethe94aab9"), _bad("veth0", "2a02:6b8::600a")
    (True, False)
    """
    if LOCAL_ADDRESS.match(addr):
        return True
    return bool(VIRTUAL_IFACE.match(name)) and not (name.startswith("veth") and addr not in ("", "?"))


def _before(state: LogState, version: tuple[int, int]) -> bool:
    """Whether the log shows an NCCL older than ``version`` (``2.3.5+cuda9.0`` -> (2, 3))."""
    seen = {p.nccl_version for p in state.procs.values() if p.nccl_version} | set(state.bare_versions)
    for v in seen:
        parts = v.split("+")[0].split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() \
                and (int(parts[0]), int(parts[1])) < version:
            return True
    return False


def _good_names(procs: Iterable[Proc]) -> list[str]:
    """Interfaces NCCL printed that can reach other nodes, most used first."""
    count: dict[str, int] = defaultdict(int)
    for p in procs:
        for n, a in [*p.bootstrap, *([p.oob] if p.oob else []), *p.socket_ifs]:
            if not _bad(n, a) and n and n != "?":
                count[n] += 1
    return sorted(count, key=lambda n: (-count[n], n))


def check_interfaces(state: LogState) -> None:
    """``net-socket-ifname``: bootstrap, OOB or Socket traffic on a virtual/loopback interface."""
    if not multi_node(state):
        _interfaces_one_host(state)
        return
    first_bad: list[tuple[Proc, tuple[str, str]]] = []
    extra_bad: list[tuple[Proc, tuple[str, str]]] = []
    by_addr: dict[str, set[str]] = defaultdict(set)
    for p in state.procs.values():
        firsts = []
        if p.bootstrap:
            firsts.append(p.bootstrap[0])
            by_addr[f"{p.bootstrap[0][0]}:{p.bootstrap[0][1]}"].add(p.host or p.node or "?")
        if p.oob:
            firsts.append(p.oob)
        if p.socket_ifs:
            firsts.append(p.socket_ifs[0])
        bad = [(n, a) for n, a in firsts if _bad(n, a)]
        if bad:
            first_bad.append((p, bad[0]))
            continue
        if p.net_family() in ("socket", None):
            extra = [(n, a) for n, a in p.socket_ifs[1:] if _bad(n, a)]
            if extra:
                extra_bad.append((p, extra[0]))
    shared = {addr: hosts for addr, hosts in by_addr.items()
              if len(hosts) > 1 and "?" not in hosts and not addr.endswith(":?")}
    if not first_bad and not extra_bad and not shared:
        return
    fix = socket_ifname_fix(_good_names(state.procs.values()), _before(state, (2, 5)))
    if first_bad or shared:
        if first_bad:
            n, a = first_bad[0][1]
            why = (f"NCCL bootstraps or connects through {n}:{a}, which cannot reach other "
                   f"nodes: {why_wrong(n, a)}")
        else:
            what = next(iter(shared))
            why = f"the same bootstrap address {what} appears on hosts {', '.join(sorted(shared[what]))}"
        procs = [p for p, _ in first_bad] or [p for p in state.procs.values() if p.bootstrap and
                                              f"{p.bootstrap[0][0]}:{p.bootstrap[0][1]}" in shared]
        _raise(state, "net-socket-ifname", f"{why} ({plural(len(procs), 'process')})", procs,
               [p.evidence.get("bootstrap") or p.evidence.get("net_socket")
                or p.evidence.get("net_ib") for p in procs[:5]], severity="error", fix=fix)
    else:
        procs = [p for p, _ in extra_bad]
        n, a = extra_bad[0][1]
        _raise(state, "net-socket-ifname",
               f"the Socket transport also spreads traffic over {n}:{a} "
               f"({plural(len(procs), 'process')}): {why_wrong(n, a)}", procs,
               [p.evidence.get("net_socket") for p in procs[:5]], fix=fix)


def _interfaces_one_host(state: LogState) -> None:
    """A log from one host cannot show the failure, only the setup for it: NCCL, left to choose
    (NCCL_SOCKET_IFNAME unset), lists a virtual or loopback interface beside a real one. Info only,
    since a job on one node never sends NCCL traffic over IP."""
    seen: list[tuple[Proc, str, str]] = []
    for p in state.procs.values():
        if "NCCL_SOCKET_IFNAME" in p.env:
            continue
        listed = [*p.bootstrap, *p.socket_ifs]
        bad = [(n, a) for n, a in listed if _bad(n, a)]
        if bad and len({n for n, _ in bad}) < len({n for n, _ in listed}):
            seen.append((p, *bad[0]))
    if not seen:
        return
    p, n, a = seen[0]
    failed = [k for k in ("log-connection-refused", "log-connection-closed") if k in state.findings]
    tail = ("; connections failed in this log, as they do when a peer is reached through it"
            if failed else ". Harmless within one node; between nodes it is the classic failure "
            "(bootstrap or Socket connections that time out)")
    _raise(state, "net-socket-ifname",
           f"NCCL lists {n}:{a} among its interfaces ({plural(len(seen), 'process')}): "
           f"{why_wrong(n, a)}{tail}", [q for q, _, _ in seen],
           [q.evidence.get("bootstrap") or q.evidence.get("net_socket") for q, _, _ in seen[:3]],
           severity="warning" if failed else "info",
           fix=socket_ifname_fix(_good_names(state.procs.values()), _before(state, (2, 5))))


def check_rdma_unused(state: LogState) -> None:
    """``nccl-ibverbs-unloadable`` and ``log-silent-socket-fallback``: RDMA in sight on a
    process's own host, yet the process talks over sockets."""
    if any(p.env.get("NCCL_IB_DISABLE", "").strip() not in ("", "0") for p in state.procs.values()):
        return                                            # sockets chosen on purpose
    socketish = [p for p in state.procs.values() if p.net_family() in ("socket", None)]
    no_verbs = [p for p in socketish if p.ibverbs_missing]
    if no_verbs:
        seen = [state.rdma_seen(p) for p in no_verbs]
        names = sorted({n for ns, _ in seen for n in ns})
        several = multi_node(state)
        if names or several:
            hint = f"; the log shows RDMA hardware ({', '.join(names[:3])})" if names else ""
            scope = "" if several else " (no traffic leaves this node in this log)"
            ifs = list(dict.fromkeys(n for p in no_verbs for n, _ in p.socket_ifs[:3]))
            over = f" on {', '.join(ifs[:3])}" if ifs else ""
            _raise(state, "nccl-ibverbs-unloadable",
                   f"libibverbs could not be loaded ({plural(len(no_verbs), 'process')}), so "
                   f"traffic between nodes goes over TCP sockets{over}: NCCL's Socket transport, "
                   "bound by the kernel's TCP stack and CPU, gets a fraction of the bandwidth "
                   f"RDMA would get from the same NIC{hint}{scope}", no_verbs,
                   [no_verbs[0].evidence.get("ibverbs")] + [e for _, es in seen for e in es][:2],
                   severity="warning" if names and several else "info")
    fallen = []
    for p in socketish:
        if p.net_family() == "socket" and not p.ibverbs_missing and (p.ib_no_device or
                                                                     p.ib_open_failed):
            names, lines = state.rdma_seen(p)
            if names:
                fallen.append((p, names, lines))
    if fallen:
        names = sorted({n for _, ns, _ in fallen for n in ns})
        _raise(state, "log-silent-socket-fallback",
               f"the Socket transport is in use ({plural(len(fallen), 'process')}) although the "
               f"log shows RDMA devices on the same host ({', '.join(names[:3])})",
               [p for p, _, _ in fallen],
               [fallen[0][0].evidence.get("ib_no_device"), fallen[0][0].evidence.get("network")]
               + fallen[0][2][:2])


def check_gdr(state: LogState) -> None:
    """``ib-gdr-not-ready``: GPUDirect RDMA disabled on the IB HCAs a process uses."""
    affected = []
    for p in state.procs.values():
        family = p.net_family() or ("ib" if any(h.startswith("IB:") for h in p.gdr) else None)
        if family != "ib" or p.gdr_connections:    # no "Using network" line: NET/IB's own lines
            continue
        disabled = [hca for hca, on in p.gdr.items() if not on and not hca.startswith("Socket")]
        if disabled and "gdr_disabled" in p.evidence:
            affected.append((p, disabled))
    keep = without_gdr_by_design(state, [p for p, _ in affected])    # DGX Spark: by design
    affected = [(p, d) for p, d in affected if p in keep]
    if not affected:
        return
    hcas = sorted({h.split(":", 1)[1] for _, d in affected for h in d})
    cause, fix = gdr_module_words([p for p, _ in affected])
    _raise(state, "ib-gdr-not-ready",
           f"GPUDirect RDMA is disabled for HCA {', '.join(hcas[:4])} on "
           f"{plural(len(affected), 'process')}; "
           "inter-node traffic is staged through host memory",
           [p for p, _ in affected], [p.evidence.get("gdr_disabled") for p, _ in affected[:3]],
           cause=cause, fix=fix)


def check_debug_vars(state: LogState) -> None:
    """``env-debug-vars-set`` (info): debugging/tuning variables NCCL reports as set, less the
    ones the net plugin set itself with that value (aws-ofi-nccl's platform defaults, e.g.
    NCCL_PROTO=simple where EFA does not order 128-byte stores: unsetting them is wrong)."""
    by_setting: dict[str, list[Proc]] = defaultdict(list)
    for p in state.procs.values():
        for name, value in p.env.items():
            if name in DEBUG_VARS and p.plugin_env.get(name) != value:
                by_setting[f"{name}={value}"].append(p)
    if not by_setting:
        return
    settings = sorted(by_setting)
    procs = list({id(p): p for ps in by_setting.values() for p in ps}.values())
    _raise(state, "env-debug-vars-set",
           f"{', '.join(settings[:4])}{' ...' if len(settings) > 4 else ''} set on "
           f"{plural(len(procs), 'process')}: debugging/tuning variables that NCCL's docs keep "
           "out of production", procs,
           [state.env_evidence.get(s) for s in settings[:5]])


def check_p2p_hang(state: LogState) -> None:
    """``gpu-p2p-unsupported``: a collective timed out on one node after every rank completed init,
    over P2P, and nothing else failed: the PCIe ACS/IOMMU signature (knowledge base §9 row 16)."""
    if "log-watchdog-timeout" not in state.findings or multi_node(state):
        return
    if any(a.severity == "error" and not a.sig.fallback and k != "log-watchdog-timeout"
           for k, a in state.findings.items()):
        return
    procs = [p for p in state.procs.values() if p.comms]
    if not procs or not all(p.init_complete for p in procs) \
            or not any("P2P" in p.transports for p in procs):
        return
    _raise(state, "gpu-p2p-unsupported",
           f"a collective timed out after all {plural(len(procs), 'process')} on this node "
           "completed init over P2P, with no NCCL error: check PCIe ACS/IOMMU if these GPUs talk "
           "over PCIe", procs, [p.evidence.get("init_complete") for p in procs[:2]],
           severity="warning",
           cause="PCIe Access Control Services (ACS) or an IOMMU (VT-d, AMD-Vi) redirect "
                 "peer-to-peer PCIe traffic through the root complex, which hangs or slows P2P "
                 "between GPUs (PIX/PXB/NODE in `nvidia-smi topo -m`) without any NCCL error.",
           fix="Confirm with NCCL_P2P_DISABLE=1 (the hang goes away); then disable ACS on the PCIe "
               "bridges (BIOS, or setpci ECAP_ACS+0x6.w=0000) and use iommu=pt or disable VT-d; "
               "NCCL_P2P_LEVEL=NVL keeps NVLink while avoiding PCIe P2P.")


def check_efa_fork(state: LogState) -> None:
    """``log-efa-fork-enomem`` only stands when the job runs over EFA (libfabric/aws-ofi-nccl);
    elsewhere an ENOMEM from Python is not NCCL's business and is dropped."""
    if "log-efa-fork-enomem" not in state.findings:
        return
    words = ("libfabric", "ofi", "efa")
    for p in state.procs.values():
        names = [p.net_name() or "", *p.plugins]
        if any(w in n.lower() for n in names for w in words):
            return
    del state.findings["log-efa-fork-enomem"]


def check_init(state: LogState) -> None:
    """``log-init-incomplete``: Init START without COMPLETE while other ranks completed."""
    procs = list(state.procs.values())
    if not any(p.init_complete for p in procs):
        return
    stuck = [p for p in procs if any(c.get("started") and c["state"] != "COMPLETE"
                                     for c in p.comms.values())]
    if not stuck:
        return
    hosts = sorted({p.host or p.node or "?" for p in stuck})
    _raise(state, "log-init-incomplete",
           f"{plural(len(stuck), 'process')} on {', '.join(hosts[:6])}"
           f"{', ...' if len(hosts) > 6 else ''} "
           "started a communicator but never printed Init COMPLETE", stuck,
           [{"file": p.first[0], "line": p.first[1], "text": f"first NCCL line of {p.key}"}
            for p in stuck[:3] if p.first])


def check_fallbacks(state: LogState) -> None:
    """Drop fallback findings when an error explains more; add the unrecognised-WARN info."""
    errors = [a for a in state.findings.values() if a.severity == "error" and not a.sig.fallback]
    if errors:
        for sig_id in [k for k, a in state.findings.items() if a.sig.fallback]:
            del state.findings[sig_id]
    serious = [a for a in state.findings.values() if a.severity in ("error", "warning")]
    if serious or not state.unrecognized:
        return
    items = sorted(state.unrecognized.items(), key=lambda kv: -kv[1][0])
    acc = _raise(state, "log-unrecognized-warn",
                 f"{sum(v[0] for _, v in items)} NCCL WARN lines of {len(items)} kinds match no "
                 f"known signature; the most frequent: {items[0][0][:120]}", [],
                 [v[1] for _, v in items[:5]])
    acc.count = sum(v[0] for _, v in items)
    for _, v in items:
        for h in v[2]:
            if len(acc.hosts) < 256:
                acc.hosts.add(h)


CHECKS = (check_versions, check_version_hints, check_drivers, check_transports, check_interfaces, check_rdma_unused,
          check_gdr, check_gdr_hosts, check_gdr_unseen, check_mixed_vendors, check_debug_vars, check_p2p_hang, check_efa_fork,
          check_bad_address_after_init, check_init, check_fallbacks)


def run_checks(state: LogState) -> None:
    """Run every whole-log check, in order (the fallback check must come last). A check that
    fails is counted like a line the parser could not read, so the rest of the diagnosis stands."""
    for check in CHECKS:
        try:
            check(state)
        except Exception as exc:  # noqa: BLE001 - one broken check must not lose the diagnosis
            state.parse_errors += 1
            if state.first_parse_error is None:
                state.first_parse_error = f"{check.__name__}: {type(exc).__name__}: {exc}"
