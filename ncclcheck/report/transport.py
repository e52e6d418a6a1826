"""What NCCL really used (from bench runs and diagnosed logs), per host; a diagnosis in brief."""

from __future__ import annotations

import os
from typing import Any

from ncclcheck.report.cells import rank_ranges, table, text
from ncclcheck.report.progress import progress_lines

#: diagnose's per-process GDR words -> did NCCL move data with GPU Direct RDMA.
GDR_WORDS = {"used": True, "enabled": True, "disabled": False}


def device_name(device: Any) -> str:
    """``mlx5_0:1/IB`` from diagnose's ``{"name", "port", "link_layer"}`` (or a string as is).

    >>> device_name({"name": "mlx5_0", "port": 1, "link_layer": "IB"}), device_name("eth0")
    ('mlx5_0:1/IB', 'eth0')
    """
    if not isinstance(device, dict):
        return str(device)
    name = str(device.get("name") or device.get("interface") or "?")
    port = f":{device['port']}" if device.get("port") is not None else ""
    layer = f"/{device['link_layer']}" if device.get("link_layer") else ""
    return name + port + layer


def transport_summary(transport: dict[str, Any], backend: Any = None) -> str:
    """One line: ``IB with GPU Direct RDMA over mlx5_0:1/IB, ... (NCCL 2.21.5)``; a gloo run
    says so, as bench printed it (``gloo over TCP (interface eth0); NCCL not used``).

    >>> transport_summary({"interfaces": ["eth0"]}, "gloo")
    'gloo over TCP (interface eth0); NCCL not used'

    >>> transport_summary({"network": "IB", "gdr": True, "hcas": ["mlx5_0:1/IB"],
    ...                    "nccl_versions": ["2.21.5"]})
    'IB with GPU Direct RDMA over mlx5_0:1/IB (NCCL 2.21.5)'
    >>> transport_summary({"network": "IB", "gdr": False, "hcas": ["a", "b", "c", "d"]})
    'IB without GPU Direct RDMA over 4 HCAs (a ... d)'
    >>> transport_summary({"network": "Socket", "gdr": None, "interfaces": ["eth0"]})
    'Socket over eth0'
    """
    if backend == "gloo":
        names = ", ".join(map(str, transport.get("interfaces") or [])) or "default"
        return f"gloo over TCP (interface {names}); NCCL not used"
    network = transport.get("network")
    if not network:
        return "not reported (run with NCCL_DEBUG=INFO)"
    devices = [str(d) for d in transport.get("hcas") or transport.get("interfaces") or []]
    shown = (", ".join(devices) if len(devices) <= 3 else
             f"{len(devices)} {'HCAs' if transport.get('hcas') else 'interfaces'} "
             f"({devices[0]} ... {devices[-1]})")
    gdr = transport.get("gdr")
    parts = [str(network)]
    if gdr is True:
        parts.append("with GPU Direct RDMA")
    elif gdr is False and str(network).startswith("IB"):
        parts.append("without GPU Direct RDMA")
    if shown:
        parts.append(f"over {shown}")
    versions = transport.get("nccl_versions") or []
    if versions:
        parts.append(f"(NCCL {', '.join(map(str, versions))})")
    return " ".join(parts)


def per_host(per_rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each host's ranks folded into one row: what they used (``mixed: ...`` when they differ)."""
    hosts: dict[str, list[dict[str, Any]]] = {}
    for r in per_rank:
        hosts.setdefault(str(r.get("host") or "?"), []).append(r)

    def one(values: list[Any]) -> Any:
        seen = list(dict.fromkeys(text(v) for v in values if v is not None and v != []))
        return seen[0] if len(seen) == 1 else f"mixed: {', '.join(seen)}" if seen else None

    rows = []
    for host, ranks in hosts.items():
        devices: list[str] = []
        for r in ranks:
            for d in r.get("hcas") or r.get("interfaces") or []:
                if d not in devices:
                    devices.append(str(d))
        rows.append({"host": host,
                     "ranks": rank_ranges([r["rank"] for r in ranks
                                           if isinstance(r.get("rank"), int)]),
                     "network": one([r.get("network") for r in ranks]),
                     "devices": devices, "gdr": one([r.get("gdr") for r in ranks]),
                     "nccl": one([r.get("nccl_version") for r in ranks]),
                     "warnings": sum(w if isinstance(w, int) else len(w or [])
                                     for w in (r.get("warnings") for r in ranks))})
    return rows


def transport_view(transport: Any, backend: Any = None) -> dict[str, Any] | None:
    """What NCCL really used, overall and per host (hosts unlike the rest stand out)."""
    if not isinstance(transport, dict):
        return None
    rows = per_host([r for r in transport.get("per_rank") or [] if isinstance(r, dict)])
    return {
        "summary": transport_summary(transport, backend),
        "hosts": (table([("host", "host"), ("ranks", "ranks"), ("network", "network"),
                         ("devices", "HCAs / interfaces"), ("gdr", "GPU Direct RDMA"),
                         ("nccl", "NCCL"), ("warnings", "NCCL warnings")], rows,
                        flag=["network", "devices", "gdr", "nccl"]) if rows else None),
    }


def log_transport(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What NCCL used according to a diagnosed log, in the bench document's transport shape."""
    if isinstance(doc.get("transport"), dict):
        return doc["transport"]
    ranks = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
    per_rank = [{"host": r.get("host"), "rank": r.get("rank"), "network": r.get("network"),
                 "hcas": [device_name(d) for d in r.get("ib_devices") or []],
                 "interfaces": [device_name(d) for d in r.get("socket_interfaces") or []],
                 "gdr": GDR_WORDS.get(r.get("gdr"), r.get("gdr")),
                 "nccl_version": r.get("nccl_version"), "warnings": r.get("warnings")}
                for r in ranks]
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    networks = [str(n) for n in summary.get("networks") or []]
    networks = networks or sorted({str(r["network"]) for r in per_rank if r["network"]})
    if not networks:
        return None
    gdr = [r["gdr"] for r in per_rank if isinstance(r["gdr"], bool)]
    hcas: list[str] = []
    interfaces: list[str] = []
    for r in per_rank:
        hcas += [str(h) for h in r["hcas"] if str(h) not in hcas]
        interfaces += [str(i) for i in r["interfaces"] if str(i) not in interfaces]
    return {"network": networks[0] if len(networks) == 1 else f"mixed: {', '.join(networks)}",
            "gdr": all(gdr) if gdr else None, "hcas": hcas, "interfaces": interfaces,
            "nccl_versions": summary.get("nccl_versions") or sorted(
                {str(r["nccl_version"]) for r in per_rank if r["nccl_version"]}),
            "per_rank": per_rank}


def diagnosis_view(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """A log diagnosis: its verdict, how much it read, and the transport the log shows."""
    findings = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    healthy = doc.get("healthy")
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    hosts, ranks = doc.get("hosts"), doc.get("ranks")
    processes = summary.get("processes", len(ranks) if isinstance(ranks, (list, dict)) else None)
    host_count = summary.get("hosts", len(hosts) if isinstance(hosts, (list, dict)) else None)
    if healthy is True:
        status = "healthy"
    elif findings:
        status = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
    elif summary.get("nccl_lines") == 0:
        status = "no NCCL output"
    else:
        status = "unknown"
    versions = summary.get("nccl_versions")
    return {"name": name, "healthy": healthy is True, "status": status,
            "host_names": [str(h) for h in hosts] if isinstance(hosts, (dict, list)) else [],
            "nccl_versions": [str(v) for v in versions] if isinstance(versions, list) else [],
            "verdict": text(summary.get("verdict")),
            "processes": text(processes), "hosts": text(host_count),
            "inputs": [os.path.basename(str(i.get("name"))) for i in doc.get("inputs") or []
                       if isinstance(i, dict)],
            "transport": transport_view(log_transport(doc)),
            "progress": progress_lines(doc),
            "culprits": [f"rank {c.get('rank')} {c.get('kind')}"
                         + (f" on {c['host']}" if c.get("host") else "")
                         for c in doc.get("culprits") or [] if isinstance(c, dict)]}
