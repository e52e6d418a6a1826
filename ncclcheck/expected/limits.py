"""What limits a low figure, named from the run's records and the facts (pure).

Each check returns sentences naming the hop: the transport NCCL used (Socket where IB ports are
up), GPUDirect RDMA off, P2P off or through SYS, NICs down or left unused, a NIC that negotiated
down, a small MTU, a link shaped slower than the others, messages too small to fill the link.
Fewer NICs than GPUs sets the range itself (per-NIC classes count the NICs there are) and is a
note of the verdict (:func:`fewer_nics_note`).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.expected import classify as cl, table


def transport_limits(sc: dict[str, Any]) -> list[str]:
    """Socket where RDMA ports are up; GDR off on a NET path."""
    out = []
    ports = cl.nic_ports(sc, cl.rdma_layer(sc))
    if (sc["network"] or "").lower() == "socket" and ports:
        out.append(f"NCCL used Socket (TCP) though RDMA ports are up ({', '.join(p['name'] for p in ports[:4])}): "
                   "check NCCL_IB_DISABLE, NCCL_NET, libibverbs")
    if sc["gdr"] is False and any(p.startswith("NET/") and not p.startswith("NET/Socket")
                                  for p in sc["paths"]):
        out.append("GPUDirect RDMA off: the NET channels have no /GDRDMA, data crosses host memory "
                   "(nvidia_peermem or DMA-BUF, NCCL_NET_GDR_LEVEL)")
    return out


def p2p_limits(sc: dict[str, Any]) -> list[str]:
    """P2P off (NCCL_P2P_DISABLE, SHM channels only) or GPUs that meet across SYS."""
    out = []
    env = sc["env"]
    shm_only = "SHM" in sc["paths"] and not any(p.startswith("P2P") for p in sc["paths"])
    if env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL") in ("LOC", "0") or shm_only:
        why = ("NCCL_P2P_DISABLE=1" if env.get("NCCL_P2P_DISABLE") == "1" else
               f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']}" if env.get("NCCL_P2P_LEVEL") else
               "the channels are via SHM")
        shm = table.by_id("pcie-sys-shm")["busbw_gbps"]
        out.append(f"P2P off ({why}): NCCL copies through host memory (SHM), which gives "
                   f"{shm[0]:g}-{shm[1]:g} GB/s (class pcie-sys-shm)")
    for f in sc["facts"][:1]:
        gpu = cl.section(f, "gpu")
        matrix = (gpu.get("topology") or {}).get("matrix") or []
        labels = (gpu.get("topology") or {}).get("labels") or []
        gidx = [i for i, lab in enumerate(labels) if str(lab).startswith("GPU")]
        if any(matrix[i][j] == "SYS" for i in gidx for j in gidx if i != j and i < len(matrix)
               and j < len(matrix[i])):
            out.append("GPUs meet across SYS (the CPU interconnect, QPI/UPI): NCCL's model gives "
                       "such a hop 6-22 GB/s")
        if gpu.get("p2p_all_supported") is False:
            out.append("the driver reports P2P unsupported between some GPUs (nvidia-smi topo -p2p)")
    return out


def nic_limits(sc: dict[str, Any]) -> list[str]:
    """NCCL using fewer ports than are up; a node with fewer ports up, or a host whose ranks
    used fewer HCAs, than the others; a port slower than its peers; a small MTU."""
    out = []
    ports = cl.nic_ports(sc, cl.rdma_layer(sc))
    used = cl.nics_used(sc)
    if used and ports and used < len(ports):
        out.append(f"NCCL used {used} of the {len(ports)} active ports "
                   f"({', '.join(sorted(next(iter(sc['hcas_by_host'].values()))))}): check NCCL_IB_HCA")
    used = {h: len(v) for h, v in sc["hcas_by_host"].items()}
    for host, n in sorted(used.items()):
        if n < max(used.values()):
            out.append(f"{host}'s ranks used {n} HCAs, the other nodes' {max(used.values())}")
    rates = [p["rate"] for p in ports if p["rate"]]
    for host, all_ports in sorted(cl.ports_by_host(sc, cl.rdma_layer(sc)).items()):
        active = [p for p in all_ports if p["state"] == "ACTIVE"]
        if len(active) < len(ports):
            down = ", ".join(f"{p['name']} {p['state']}" for p in all_ports
                             if p["state"] != "ACTIVE")
            out.append(f"{host}: {len(active)} of the {len(ports)} ports active ({down})")
        for p in active:
            if p["rate"] and rates and p["rate"] < max(rates):
                out.append(f"{host}: {p['name']} negotiated {p['rate']:g} Gb/s, its peers "
                           f"{max(rates):g}")
    netdevs = {p["netdev"] for p in ports} | set(sc["interfaces"])
    for f in sc["facts"]:
        host = f.get("hostname") or "?"
        for i in cl.section(f, "network").get("interfaces") or []:
            if i.get("name") in netdevs and i.get("mtu") and i["mtu"] < 4000 and \
                    (i.get("speed_mbps") or 0) >= 100000:
                out.append(f"{host}: {i['name']} MTU {i['mtu']} on a {i['speed_mbps'] // 1000} "
                           "Gb/s link (jumbo frames: 9000; RoCE ports 4200 for a 4096 RoCE MTU)")
    return out


def shaped_limits(sc: dict[str, Any]) -> list[str]:
    """Links ``tc`` shapes slower than the nominal rate, by host and interface."""
    rate, how = cl.shaped_rate(sc)
    out = []
    for host, links in sorted(sc["links"].items()):
        for link in links:
            if rate and link.get("rate_bps") and link["rate_bps"] / 8e9 < rate * 0.9:
                out.append(f"{host} {link.get('ifname')}: shaped to {link.get('rate_text') or link['rate_bps']} "
                           f"by tc ({link.get('qdisc')}), below the {rate * 8000:g} Mbit/s "
                           f"of the others ({how})")
    return out


def fewer_nics_note(nics: int | None, per_node: int | None) -> list[str]:
    """Fewer NICs than GPUs per node: the range is for the NICs there are.

    >>> fewer_nics_note(4, 8)
    ['4 NICs for 8 GPUs per node: the range is for 4 NICs (one per GPU would double it)']
    """
    if not nics or not per_node or nics >= per_node:
        return []
    times = per_node / nics
    more = "double it" if times == 2 else f"give {times:g} x"
    return [f"{nics} NIC{'s' if nics != 1 else ''} for {per_node} GPUs per node: the range is for "
            f"{nics} NIC{'s' if nics != 1 else ''} (one per GPU would {more})"]


def size_limit(max_bytes: int | None, entry: dict[str, Any]) -> list[str]:
    """Messages smaller than the sizes the class holds for."""
    need = entry.get("min_bytes") or 0
    if max_bytes is not None and max_bytes < need:
        return [f"messages too small: the largest is {max_bytes} B, the range holds from "
                f"{need} B (-e {need >> 20}M)"]
    return []


def ranks_share_gpu(sc: dict[str, Any]) -> list[str]:
    """Two ranks on one GPU (same host and bus id in the ``# Rank`` lines)."""
    seen: dict[tuple, int] = {}
    for key in sc["bus_ids"]:
        seen[key] = seen.get(key, 0) + 1
    return [f"{n} ranks share the GPU at {bus} on {host}" for (host, bus), n in seen.items() if n > 1]
