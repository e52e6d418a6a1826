"""The hardware class of a run, found from what it recorded (pure).

A *scene* (:func:`scene`) gathers what a bench document says -- its ranks' GPU names (nccl-tests'
``# Rank`` lines or the ranks' own device names), nodes and ranks per node, the NCCL INFO lines'
network, channels (``via P2P``, ``via SHM``, ``via NET/IB/0/GDRDMA``), HCAs and GDR, the NCCL
variables in effect -- plus, where given, the facts of its nodes (``--probe FACTS``: NIC rates,
NVLink, topology), the rate ``tc`` shapes each node's link to, and ``--link-rate``.
:func:`classify` names the class of the table it belongs to, or says what is missing to tell.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.expected import gpus, table

#: NIC rates (Gb/s) of the IB and RoCE classes.
IB_CLASSES = {200: "ib-hdr", 400: "ib-ndr"}
ROCE_CLASSES = {100: "roce-100", 200: "roce-200", 400: "roce-400"}
TCP_CLASSES = {10: "tcp-10", 25: "tcp-25", 100: "tcp-100"}
EFA_CLASSES = {"A100": "efa-p4d", "H100": "efa-p5", "H200": "efa-p5en", "T4": "efa-g4dn"}
#: The network classes an 8-GPU node of a model can sit on (the envelope when none is named).
NETWORKS_OF = {"H100": ["efa-p5", "gcp-tcpx", "gcp-tcpxo", "ib-ndr", "roce-400"],
               "H200": ["efa-p5en", "ib-ndr", "roce-400"],
               "A100": ["efa-p4d", "ib-hdr", "roce-100", "roce-200"],
               "B200": ["ib-ndr", "roce-400"]}
NEED_NETWORK = ("which network NCCL used: rerun with NCCL_DEBUG=INFO (its INFO lines name it) "
                "or give the nodes' facts (--probe FACTS)")


def section(facts: dict[str, Any] | None, name: str) -> dict[str, Any]:
    sec = ((facts or {}).get("sections") or {}).get(name) or {}
    return sec.get("data") or {}


def scene(doc: dict[str, Any], facts: list[dict[str, Any]] | None = None,
          link_rate_gbps: float | None = None) -> dict[str, Any]:
    """What the class is found from: the document's records and, where given, facts and rates."""
    transport = doc.get("transport") or {}
    imported = (doc.get("imported_from") or {}).get("ranks") or []
    per_rank = transport.get("per_rank") or []
    names = [r.get("gpu") for r in imported if r.get("gpu")]
    names = names or [r.get("device") for r in per_rank if r.get("device")]
    facts = [f for f in facts or [] if isinstance(f, dict)]
    if not names:
        for f in facts:
            names += [g.get("name") for g in section(f, "gpu").get("gpus") or [] if g.get("name")]
    bus = [(r.get("host"), r.get("bus_id")) for r in imported if r.get("bus_id")]
    paths = sorted({p for r in per_rank for p in r.get("paths") or []})
    hcas_by_host: dict[str, set[str]] = {}
    for r in per_rank:
        for h in r.get("hcas") or []:
            hcas_by_host.setdefault(str(r.get("host")), set()).add(h.split(":")[0])
    env = dict(doc.get("env") or {})
    env.update(doc.get("candidate_env") or {})
    rpn = doc.get("ranks_per_node")
    per_node = rpn if isinstance(rpn, int) else (max(rpn) if isinstance(rpn, list) and rpn else None)
    nodes = len(doc.get("nodes") or []) or (1 if doc.get("world_size") else 0)
    launch = doc.get("launch") if isinstance(doc.get("launch"), dict) else {}
    return {"op": doc.get("op"), "backend": doc.get("backend"), "world": doc.get("world_size"),
            "nodes": nodes, "per_node": per_node or doc.get("world_size"),
            "gpu_names": names, "bus_ids": bus, "network": transport.get("network"),
            "provider": next((r.get("provider") for r in per_rank if r.get("provider")), None),
            "paths": paths, "gdr": transport.get("gdr"), "hcas": transport.get("hcas") or [],
            "hcas_by_host": {h: sorted(v) for h, v in hcas_by_host.items()},
            "interfaces": transport.get("interfaces") or [], "env": env, "facts": facts,
            "links": launch.get("links") or {},
            "link_rate_gbps": link_rate_gbps or doc.get("link_rate_gbps")}


def shaped_rate(sc: dict[str, Any]) -> tuple[float | None, str | None]:
    """(rate GB/s, how it was found): ``--link-rate``, else the fastest shaped link (the
    nominal rate; slower ones are limits, :mod:`~ncclcheck.expected.limits`)."""
    if sc.get("link_rate_gbps"):
        return float(sc["link_rate_gbps"]), "--link-rate"
    rates = [l["rate_bps"] for links in sc["links"].values() for l in links if l.get("rate_bps")]
    if rates:
        return max(rates) / 8e9, "tc qdisc"
    return None, None


def ports_by_host(sc: dict[str, Any], layer: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every node's RDMA ports in the facts (of one link layer, when given): name, layer,
    rate (Gb/s), state, netdev."""
    out: dict[str, list[dict[str, Any]]] = {}
    for f in sc["facts"]:
        host = str(f.get("hostname") or section(f, "host").get("hostname") or "?")
        ports = out.setdefault(host, [])
        for dev in section(f, "ib").get("devices") or []:
            for p in dev.get("ports") or []:
                if layer in (None, p.get("link_layer")):
                    ports.append({"name": dev.get("name"), "layer": p.get("link_layer"),
                                  "rate": p.get("rate_gbps"), "netdev": p.get("netdev"),
                                  "state": p.get("state")})
    return out


def nic_ports(sc: dict[str, Any], layer: str | None = None) -> list[dict[str, Any]]:
    """The active RDMA ports of the node with the most of them (what the hardware gives)."""
    active = [[p for p in ports if p["state"] == "ACTIVE"]
              for ports in ports_by_host(sc, layer).values()]
    return max(active, key=len, default=[])


def rdma_layer(sc: dict[str, Any]) -> str:
    """``InfiniBand`` or ``Ethernet`` (RoCE): what NCCL's NET/IB line named, else the layer most
    of the facts' active ports have."""
    named = {h.rsplit("/", 1)[-1] for h in sc["hcas"] if "/" in h}
    if named:
        return "Ethernet" if named == {"RoCE"} else "InfiniBand"
    layers = [p["layer"] for p in nic_ports(sc) if p["layer"]]
    return max(set(layers), key=layers.count) if layers else "InfiniBand"


def nics_used(sc: dict[str, Any]) -> int | None:
    """The most HCAs one host's ranks named in their ``NET/IB : Using`` lines."""
    return max((len(v) for v in sc["hcas_by_host"].values()), default=0) or None


def nic_count(sc: dict[str, Any]) -> int | None:
    """NICs a node has for the class: the facts' active ports of the link layer in use (what the
    hardware gives), else the HCAs NCCL named."""
    return len(nic_ports(sc, rdma_layer(sc))) or nics_used(sc)


def _nearest(rate: float | None, choices: dict[int, str]) -> str | None:
    if not rate:
        return None
    best = min(choices, key=lambda r: abs(r - rate))
    return choices[best] if abs(best - rate) <= best * 0.25 else None


def _socket_speed_gbit(sc: dict[str, Any]) -> float | None:
    for f in sc["facts"][:1]:
        for i in section(f, "network").get("interfaces") or []:
            if i.get("name") in sc["interfaces"] and i.get("speed_mbps"):
                return i["speed_mbps"] / 1000
    return None


def network_class(sc: dict[str, Any], model: str | None) -> tuple[str | None, list[str]]:
    """The class of a multi-node run's network, or what is missing to tell."""
    rate, _ = shaped_rate(sc)
    net = (sc["network"] or "").lower()
    if rate and (sc["backend"] == "gloo" or net == "" or (net == "socket" and not nic_ports(sc))):
        return "tcp-shaped", []
    if sc["backend"] == "gloo":
        speed = _socket_speed_gbit(sc)
        return (_nearest(speed, TCP_CLASSES), []) if speed else (
            None, ["the link rate: --link-rate GB/s, or the nodes' facts (--probe FACTS)"])
    if "libfabric" in net or "ofi" in net or (sc["provider"] or "").lower() == "efa":
        return (EFA_CLASSES.get(model or ""), [] if model in EFA_CLASSES else
                [f"the instance type: EFA classes exist for {', '.join(EFA_CLASSES)} nodes"])
    if "tcpxo" in net or "fastrak" in net:
        return "gcp-tcpxo", []
    if "tcpx" in net:
        return "gcp-tcpx", []
    if net.startswith(("ib", "gib")) or (net == "socket" and nic_ports(sc)):
        # the RDMA ports' class; Socket over them is a limit (ncclcheck.expected.limits)
        layer = rdma_layer(sc)
        rates = [p["rate"] for p in nic_ports(sc, layer) if p["rate"]]
        if not rates:
            return None, ["the NICs' link rate (ibstat): give the nodes' facts (--probe FACTS)"]
        found = _nearest(max(rates), ROCE_CLASSES if layer == "Ethernet" else IB_CLASSES)
        return found, [] if found else [f"a class for {max(rates):g} Gb/s NICs"]
    if net == "socket":
        speed = _socket_speed_gbit(sc)
        return (_nearest(speed, TCP_CLASSES), []) if speed else (
            None, ["the Socket interfaces' speed: give the nodes' facts (--probe FACTS)"])
    return None, [NEED_NETWORK]


def node_class(sc: dict[str, Any], model: str | None, names: list[str]) -> tuple[str | None, list[str]]:
    """The class of a single-node run: NVLink by model and GPU count, else PCIe by generation."""
    count = sc["per_node"] or 0
    if all(gpus.nvlink_capable(n) for n in names):
        env = sc["env"]
        nvls_off = env.get("NCCL_NVLS_ENABLE") == "0" or (env.get("NCCL_ALGO") or "").lower() in (
            "ring", "tree")
        if model == "A100":
            return ("nvlink-a100-2-4" if count <= 4 else "nvlink-a100-8"), []
        if model in ("H100", "H200") and count >= 5:
            return ("nvlink-hopper-8-ring" if nvls_off else f"nvlink-{model.lower()}-8"), []
        if model in ("H100", "H200", "H20") and count <= 4:
            return "nvlink-hopper-2-4", []
        if model in ("B200", "B300") and count >= 5:
            return "nvlink-b200-8", []
        if model == "GB200":
            return ("nvlink-gb200-tray" if count <= 4 else "nvlink-gb200-nvl72"), []
        return None, [f"a class for {count} x {model} on NVLink"]
    gen = gpus.pcie_gen(names[0])
    if gen in (4, 5) and all(gpus.pcie_gen(n) == gen for n in names):
        return f"pcie-gen{gen}-p2p", []
    return None, [f"the PCIe generation of {names[0]} (a class exists for Gen4 and Gen5)"]


def classify(sc: dict[str, Any]) -> dict[str, Any]:
    """``{"class", "missing", "model", "nics", "rate_gbps", "envelope"}`` for a scene."""
    names = sc["gpu_names"]
    models = {gpus.gpu_model(n) for n in names}
    model = models.pop() if len(models) == 1 else None
    out: dict[str, Any] = {"class": None, "missing": [], "model": model, "nics": None,
                           "rate_gbps": None, "envelope": None}
    if (sc["world"] or 0) < 2:
        out["missing"] = ["a second rank: with one rank busbw is 0 by nccl-tests' definition "
                          "(factor 2(n-1)/n)"]
        return out
    if sc["nodes"] >= 2:
        found, missing = network_class(sc, model)
        out["class"], out["missing"] = found, missing
        if found and table.by_id(found).get("per") == "nic":
            out["nics"] = nic_count(sc)
            if not out["nics"]:
                out["missing"].append("how many NICs a node used (NCCL INFO NET/IB lines or facts)")
        if found == "tcp-shaped":
            out["rate_gbps"], out["rate_from"] = shaped_rate(sc)
        if not found and NEED_NETWORK in missing and model in NETWORKS_OF and (sc["per_node"] or 0) >= 8:
            out["envelope"] = NETWORKS_OF[model]
        return out
    if not names or sc["backend"] == "gloo" or any(n == "cpu" for n in names):
        out["missing"] = ["GPUs: the ranks ran on CPUs (gloo) in one node; no hardware class"
                          if sc["backend"] == "gloo" or "cpu" in names else
                          "the GPU model: rerun with the ranks' device lines or --probe FACTS"]
        return out
    if model is None:
        out["missing"] = ["one GPU model: the ranks name several (" + ", ".join(sorted(set(names)))
                          + ")"]
        return out
    out["class"], out["missing"] = node_class(sc, model, names)
    return out
