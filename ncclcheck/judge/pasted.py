"""Findings from pasted ``ibstat`` / ``ibv_devinfo`` / ``show_gids`` output (issue 13).

The pasted text is read into the ``ib`` probe's facts (:mod:`ncclcheck.logparse.pasted_ib`), and
the port states are named by the rules engine's own helper
(:func:`ncclcheck.rules.cluster_ib_ports_down.port_states`), so a paste and a probe say the same.
Findings, under the ids the rules use for the same problems:

* ``ib-gdr-not-ready`` / ``gpu-p2p-unsupported`` (info): from ``nvidia-smi topo -m``, GPUs whose
  NICs are all beyond PXB, and GPU pairs that talk over PCIe (the ACS/IOMMU advice);
* ``net-socket-ifname``: from pasted ``ip addr`` output, in :mod:`ncclcheck.judge.pasted_ip`;

* ``cluster-ib-ports-down``: a port that is not ACTIVE (DOWN, INIT, Disabled, Polling), named;
* ``ib-hca-select``: ACTIVE ports at different rates (NCCL runs every ring at the slowest);
* ``ib-roce-gid-index``: the RoCE v2 GID index with an IPv4-mapped address, as the
  ``NCCL_IB_GID_INDEX`` to set (3 with the usual v1/v2 link-local then v1/v2 IPv4 table, 7 when a
  container shows only entries 4-7).
"""

from __future__ import annotations

from typing import Any, Optional

from ncclcheck.logparse.pasted import Pasted
from ncclcheck.logparse.pasted_ib import PastedIb
from ncclcheck.logparse.state import LogState
from ncclcheck.judge.derived_base import _raise
from ncclcheck.judge.pasted_ip import _acc_hosts, check_interfaces


def _facts(host: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """A minimal facts document holding only the ``ib`` section the paste showed."""
    return {"hostname": host,
            "sections": {"ib": {"status": "ok", "data": {"devices": devices}}}}


def check_pasted(state: LogState, pasted: Pasted) -> None:
    """Raise the findings the pasted output shows."""
    check_interfaces(state, pasted)
    check_topology(state, pasted)
    check_nccl_tests(state, pasted)
    by_host = pasted.ib.devices()
    if not by_host:
        return
    what = "/".join(sorted(pasted.ib.kinds)) or "pasted output"
    _ports_down(state, pasted.ib, by_host, what)
    _rates(state, pasted.ib, by_host, what)
    _gid_index(state, pasted.ib, by_host, what)


def _ports_down(state: LogState, pasted: PastedIb, by_host: dict[str, list[dict[str, Any]]],
                what: str) -> None:
    from ncclcheck.rules.cluster_ib_ports_down import port_states

    down = {}
    for host, devices in by_host.items():
        states = port_states(_facts(host, devices))
        bad = [f"{p} {s}" for p, s in states.items() if s != "ACTIVE" and not s.startswith("?")]
        if bad:
            down[host] = bad
    if not down:
        return
    where = "; ".join(f"{'' if h == 'pasted' else h + ': '}{', '.join(v[:6])}"
                      for h, v in list(down.items())[:4])
    init = any("INIT" in x for v in down.values() for x in v)
    names = sorted({x.split(":")[0] for v in down.values() for x in v})
    acc = _raise(state, "cluster-ib-ports-down",
                 f"{what}: RDMA ports not ACTIVE: {where}" + (
                     " (INIT: the link trained but no subnet manager configured it)" if init else ""),
                 [], [pasted.evidence.get(f"{h} {x.split(' ')[0]}") for h, v in down.items()
                      for x in v][:5], severity="warning",
                 title="RDMA ports not ACTIVE in the pasted port listing",
                 cause="NCCL only uses ACTIVE ports (src/transport/net_ib/init.cc). A node with a "
                       "port down has fewer rails, and every ring or tree through it slows to its "
                       "bandwidth; a port NCCL_IB_HCA names explicitly that is down fails the job.",
                 fix="Bring the port up: cable and switch port (`mlxlink -d <dev>`), the subnet "
                     "manager for INIT (`sminfo`), a disabled port with `ibportstate`. Until then, "
                     f"leave it out of NCCL_IB_HCA (NCCL_IB_HCA=^{','.join(names[:4])}).")
    _acc_hosts(acc, list(down))


def _rates(state: LogState, pasted: PastedIb, by_host: dict[str, list[dict[str, Any]]],
           what: str) -> None:
    rates: dict[float, list[str]] = {}
    for host, devices in by_host.items():
        for d in devices:
            for p in d["ports"]:
                if p["state"] == "ACTIVE" and p["rate_gbps"]:
                    label = f"{'' if host == 'pasted' else host + ' '}{d['name']}:{p['port']}"
                    rates.setdefault(p["rate_gbps"], []).append(label)
    if len(rates) < 2:
        return
    top = max(rates)
    slow = sorted(n for r, ns in rates.items() if r != top for n in ns)
    keep = sorted({n.split(" ")[-1].split(":")[0] for n in rates[top]})
    parts = [f"{r:g} Gb/s: {', '.join(ns[:4])}" for r, ns in sorted(rates.items(), reverse=True)]
    acc = _raise(state, "ib-hca-select",
                 f"{what}: ACTIVE RDMA ports run at different rates ({'; '.join(parts)})", [],
                 [pasted.kinds[k] for k in sorted(pasted.kinds)][:2], severity="warning",
                 title="ACTIVE RDMA ports at different rates in the pasted port listing",
                 cause="Unset, NCCL_IB_HCA lets NCCL use every ACTIVE port; rings and trees over a "
                       "slower port (a front-end or storage NIC, or a port trained at a lower "
                       "speed) run at its rate.",
                 fix=f"Keep the slow ports out: NCCL_IB_HCA=={','.join(keep[:8])} (exact names, "
                     f"NCCL >= 2.5); check why {', '.join(slow[:3])} trained slower if it should "
                     "not (`mlxlink`, cable).")
    _acc_hosts(acc, list(by_host))


def _gid_setting(state: LogState) -> tuple[Optional[str], list[dict[str, Any]]]:
    """The NCCL_IB_GID_INDEX the paste or the log sets (``export NCCL_IB_GID_INDEX=4``, or NCCL's
    own ``NCCL_IB_GID_INDEX set by environment to 4``), and the line that says so."""
    exported = state.exported.get("NCCL_IB_GID_INDEX")
    if exported is not None:
        return exported[0], [exported[1]]
    for p in state.procs.values():
        value = p.env.get("NCCL_IB_GID_INDEX")
        if value is not None:
            return value, [state.env_evidence.get(f"NCCL_IB_GID_INDEX={value}") or {}]
    return None, []


def _describe_gid(port: dict[str, Any], index: int) -> str:
    gid = next((g for g in port["gids"] if g["index"] == index), None)
    if gid is None:
        shown = sorted(g["index"] for g in port["gids"])
        return f"not in the table (this port shows indexes {_ranges(shown)})"
    what = gid["type"] or "a GID"
    return f"{what} with {'IPv4 ' + gid['ipv4'] if gid['ipv4'] else 'a link-local (fe80::) address'}"


def _ranges(numbers: list[int]) -> str:
    """``4-7``, ``0-3, 6``.

    >>> _ranges([4, 5, 6, 7]), _ranges([0, 1, 2, 3, 6])
    ('4-7', '0-3, 6')
    """
    out: list[str] = []
    for n in numbers:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = out[-1].split("-")[0] + f"-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


def _gid_index(state: LogState, pasted: PastedIb, by_host: dict[str, list[dict[str, Any]]],
               what: str) -> None:
    found: dict[int, list[tuple[str, str, dict[str, Any]]]] = {}
    missing: list[str] = []
    for host, devices in by_host.items():
        for d in devices:
            for p in d["ports"]:
                if not p["gids"] or p["link_layer"] == "InfiniBand":
                    continue
                label = f"{'' if host == 'pasted' else host + ' '}{d['name']}:{p['port']}"
                if p["roce_v2_ipv4_gid_index"] is None:
                    missing.append(label)
                else:
                    found.setdefault(p["roce_v2_ipv4_gid_index"], []).append(
                        (label, f"{host} {d['name']}:{p['port']}", p))
    if not found and not missing:
        return
    ev = [pasted.kinds[k] for k in ("show_gids", "ibv_devinfo") if k in pasted.kinds]
    if len(found) == 1 and not missing:
        index, ports = next(iter(found.items()))
        labels = [label for label, _, _ in ports]
        rows = [pasted.gid_rows.get(f"{key} {index}") for _, key, _ in ports[:2]]
        shown = sorted({g["index"] for _, _, p in ports for g in p["gids"]})
        sparse = bool(shown) and shown[0] > 0
        trap = (f" This table starts at index {shown[0]} (indexes {_ranges(shown)}: a container or "
                "pod with a macvlan/SR-IOV netdev sees only its own entries), so neither NCCL < "
                "2.21's default 0 nor the 3 of bare-metal guides exists here." if sparse else "")
        setting, set_ev = _gid_setting(state)
        if setting is not None and setting.strip() != str(index):
            try:
                described = _describe_gid(ports[0][2], int(setting))
                wrong_row = [pasted.gid_rows.get(f"{ports[0][1]} {int(setting)}")]
            except ValueError:
                described, wrong_row = "not a GID index", []
            acc = _raise(state, "ib-roce-gid-index",
                         f"{what}: NCCL_IB_GID_INDEX={setting} is set, but index {setting} on "
                         f"{labels[0]} is {described}; the RoCE v2 GID with an IPv4 address is "
                         f"index {index}: set NCCL_IB_GID_INDEX={index}.{trap}", [],
                         set_ev + wrong_row + rows, severity="warning",
                         title="NCCL_IB_GID_INDEX names a GID that is not RoCE v2 with IPv4",
                         cause="NCCL uses the GID at NCCL_IB_GID_INDEX for every queue pair "
                               "(src/transport/net_ib/connect.cc); a RoCE v1 or link-local entry "
                               "is not routed between subnets, and an index the port does not "
                               "have fails ibv_modify_qp with EINVAL.",
                         fix=f"Set NCCL_IB_GID_INDEX={index} on every node (or, on NCCL >= 2.21, "
                             "unset it: ncclIbGetGidIndex then picks the RoCE v2 IPv4 entry of "
                             "each port).")
        else:
            acc = _raise(state, "ib-roce-gid-index",
                         f"{what}: the RoCE v2 GID with an IPv4 address is index {index} on "
                         f"{', '.join(labels[:4])}: NCCL_IB_GID_INDEX={index}.{trap}", [],
                         rows + ev, severity="info",
                         title="the NCCL_IB_GID_INDEX to set, read from the pasted GID table",
                         cause="RoCE needs the GID that carries the routable IPv4 address as RoCE v2; "
                               "NCCL >= 2.21 finds it by itself (ncclIbGetGidIndex), older NCCL uses "
                               "index 0 (RoCE v1, link-local) unless told.",
                         fix=f"On NCCL < 2.21 set NCCL_IB_GID_INDEX={index} on every node (the same "
                             "index everywhere); on >= 2.21 leave it unset.")
    else:
        parts = [f"index {i} on {', '.join(lb for lb, _, _ in ps[:3])}"
                 for i, ps in sorted(found.items())]
        if missing:
            parts.append(f"none on {', '.join(missing[:3])}")
        acc = _raise(state, "ib-roce-gid-index",
                     f"{what}: the RoCE v2 IPv4 GID is not at one index: {'; '.join(parts)}", [], ev,
                     severity="warning",
                     title="the RoCE v2 IPv4 GID is at different indexes (pasted GID table)",
                     cause="NCCL_IB_GID_INDEX is one number for every HCA of a process "
                           "(https://github.com/NVIDIA/nccl/issues/890); ports whose RoCE v2 IPv4 "
                           "GID sits elsewhere, or that have none (no IPv4 address on the netdev), "
                           "cannot connect with it.",
                     fix="Give every RoCE netdev its IPv4 address, and on NCCL >= 2.21 leave "
                         "NCCL_IB_GID_INDEX unset (each port's GID is then found separately); "
                         "older NCCL needs the same index on every port.")
    _acc_hosts(acc, list(by_host))


#: PCIe path levels of ``nvidia-smi topo -m``, nearest first (NCCL's PATH_PIX ... PATH_SYS).
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def _nvlinked(cell: Any) -> bool:
    return isinstance(cell, str) and cell.startswith("NV")


def check_topology(state: LogState, pasted: Pasted) -> None:
    """``nvidia-smi topo -m``: GPUs whose every NIC is beyond PXB (GPUDirect RDMA off by default:
    ``netGdrLevel = PATH_PXB`` in src/graph/paths.cc) with no NVLink to a GPU that has a near NIC
    (PXN could route through it); GPU pairs without NVLink that talk over PCIe switches or through
    the CPU (the PCIe ACS / IOMMU trap, NVIDIA/nccl#667, #2079)."""
    for host, topo, ev in pasted.topo.matrices:
        labels, matrix = topo["labels"], topo["matrix"]
        gpus = [i for i, lb in enumerate(labels) if lb.startswith("GPU")]
        nics = [i for i, lb in enumerate(labels) if lb.startswith("NIC")]
        where = "" if host == "pasted" else f" on {host}"
        nearest = {}
        for g in gpus:
            cells = [(LEVELS.index(matrix[g][n]), labels[n]) for n in nics
                     if matrix[g][n] in LEVELS]
            if cells:
                nearest[g] = min(cells)
        near = {g for g, (rank, _) in nearest.items() if rank <= LEVELS.index("PXB")}
        far = [g for g, (rank, _) in nearest.items() if g not in near and not any(
            _nvlinked(matrix[g][h]) for h in near)]
        if far and nics:
            names = topo.get("nics") or {}
            groups: dict[tuple[int, str], list[str]] = {}
            for g in far:
                groups.setdefault(nearest[g], []).append(labels[g])
            parts = [f"{nic}{' (' + names[nic] + ')' if names.get(nic) else ''} is {LEVELS[rank]} "
                     f"from {', '.join(gs)}" for (rank, nic), gs in sorted(groups.items())[:4]]
            acc = _raise(state, "ib-gdr-not-ready",
                         f"nvidia-smi topo -m{where}: the nearest NIC is beyond PXB for "
                         f"{len(far)} of {len(gpus)} GPUs ({'; '.join(parts)}"
                         f"{'; ...' if len(groups) > 4 else ''}): NCCL leaves GPUDirect RDMA off "
                         "for them by default, so their network traffic is staged through host "
                         "memory", [], [ev], severity="info",
                         title="GPUs without a NIC within PXB in the pasted topology (GPUDirect "
                               "RDMA off by default)",
                         cause="NCCL enables GPUDirect RDMA only when GPU and NIC are at most PXB "
                               "apart (NCCL_NET_GDR_LEVEL, default PXB; src/graph/paths.cc "
                               "ncclTopoCheckGdr); through the CPU (PHB/NODE/SYS) it copies "
                               "through host memory instead.",
                         fix="Expected on this layout. NCCL_NET_GDR_LEVEL=PHB (or SYS) enables "
                             "GPUDirect RDMA anyway; whether it is faster there depends on the "
                             "CPU's PCIe peer-to-peer: measure with `ncclcheck bench --compare`.")
            _acc_hosts(acc, [host])
        pcie = [(labels[a], labels[b], matrix[a][b]) for k, a in enumerate(gpus) for b in gpus[k + 1:]
                if matrix[a][b] in LEVELS]
        if pcie:
            switch = [p for p in pcie if p[2] in ("PIX", "PXB")]
            cpu = [p for p in pcie if p[2] not in ("PIX", "PXB")]
            sample = "; ".join(f"{a}-{b} {c}" for a, b, c in (switch + cpu)[:6])
            acc = _raise(state, "gpu-p2p-unsupported",
                         f"nvidia-smi topo -m{where}: {len(pcie)} GPU pairs have no NVLink and "
                         f"talk over PCIe ({sample}{'; ...' if len(pcie) > 6 else ''}): "
                         "peer-to-peer there hangs or crawls, without an NCCL error, when PCIe "
                         "ACS or an IOMMU redirects it", [], [ev], severity="info",
                         title="GPU pairs without NVLink talk over PCIe in the pasted topology",
                         cause="Without NVLink, NCCL's P2P transport goes over PCIe: through "
                               "switches (PIX/PXB) ACS on the switch ports, and through the CPU "
                               "(PHB/NODE/SYS; used by default on AMD, not on Intel CPUs, "
                               "src/graph/paths.cc p2pLevel) ACS on the root ports or the IOMMU, "
                               "send it through the root complex, which can hang.",
                         fix="If a collective hangs or is slow: confirm with NCCL_P2P_DISABLE=1; "
                             "then disable ACS (BIOS, or `setpci -s <bridge> ECAP_ACS+6.w=0000`, "
                             "or pci=noacs) and boot with iommu=pt / VT-d off.")
            _acc_hosts(acc, [host])


def check_nccl_tests(state: LogState, pasted: Pasted) -> None:
    """nccl-tests tables: wrong values, and a bus bandwidth of 0 while data moved."""
    for facts, ev in pasted.tests.tables:
        rows = facts["rows"]
        op = facts.get("op") or facts.get("op_from_command")
        name = f"nccl-tests {op}" if op else "nccl-tests"
        halves = [h for r in rows for h in (r["out_of_place"], r["in_place"]) if h]
        wrong = sum(h.get("wrong") or 0 for h in halves)
        oob = facts.get("out_of_bounds") or 0
        if wrong or oob:
            first = next((r for r in rows if any(h and h.get("wrong") for h in
                                                 (r["out_of_place"], r["in_place"]))), None)
            _raise(state, "log-nccl-tests-wrong",
                   f"{name}: {max(wrong, oob)} wrong values"
                   + (f", from {first['size_bytes']} bytes on" if first else ""), [], [ev],
                   severity="error")
        moved = [h for h in halves if h["algbw_gbps"] > 0]
        ranks = facts.get("ranks") or []
        alone = len({r["pid"] for r in ranks}) > 1 and all(r["rank"] == 0 for r in ranks)
        zero = bool(moved) and all(h["busbw_gbps"] == 0 for h in moved) and (
            facts.get("avg_busbw_gbps") in (None, 0))
        if zero or alone:
            hosts = sorted({r["host"] for r in ranks})
            what = []
            if zero:
                what.append(f"busbw is 0 in every row while algbw reaches "
                            f"{max(h['algbw_gbps'] for h in moved):g} GB/s")
            if alone:
                what.append(f"{len(ranks)} processes each print 'Rank 0' "
                            f"(on {', '.join(hosts[:4])})")
            acc = _raise(state, "log-nccl-tests-one-rank",
                         f"{name}: {'; '.join(what)}: each process "
                         "ran its own one-rank test", [], [ev], severity="error")
            _acc_hosts(acc, hosts)
