"""What ``nvidia-smi`` prints: the ``--query-gpu`` CSV and banner (the fallback when NVML cannot
load), and ``topo -m`` / ``topo -p2p`` matrices with NIC columns and CPU/NUMA affinity."""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host.protocol import CommandResult, Host
from ncclcheck.probes.gpu.types import _int, normalize_bus_id


SMI_TIMEOUT_S = 10.0
SMI_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "pcie.link.gen.current",
              "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
              "persistence_mode", "mig.mode.current", "ecc.mode.current", "driver_version")
SMI_QUERY = ["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_cuda_version(text: str) -> Optional[str]:
    """The "CUDA Version" of the ``nvidia-smi`` banner (or of ``nvidia-smi -q``).

    Recorded banner line of driver 535.129.03 (the doctest below).

    >>> parse_cuda_version("| NVIDIA-SMI 535.129.03   Driver Version: 535.129.03   "
    ...                    "CUDA Version: 12.2     |")
    '12.2'
    >>> parse_cuda_version("garbage") is None
    True
    """
    m = re.search(r"CUDA Version\s*:\s*(\d+\.\d+)", text or "")
    return m[1] if m else None


def _smi_value(text: str) -> Optional[str]:
    text = text.strip()
    return None if not text or text.startswith("[") or text in ("N/A", "Not Supported") else text


def _enabled(text: Optional[str]) -> Optional[bool]:
    return {"enabled": True, "disabled": False}.get((text or "").lower())


def parse_smi_query(text: str) -> dict[str, Any]:
    """``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` -> driver, GPUs.

    Recorded on an AWS g5.12xlarge (4x A10G; UUID shortened): the doctest's first line.

    Lines that do not start with a GPU index are skipped, so garbage gives no GPUs. NVLink is
    not in this output: ``nvlinks`` is None (unknown).

    >>> out = parse_smi_query("0, NVIDIA A10G, GPU-3b8f, 00000000:00:1B.0, 23028, 1, 4, 16, 16, "
    ...                       "Enabled, [N/A], Enabled, 535.183.01")
    >>> out["driver_version"], out["gpus"][0]["pci_bus_id"], out["gpus"][0]["memory_total_bytes"]
    ('535.183.01', '0000:00:1b.0', 24146608128)
    >>> out["gpus"][0]["pcie"], out["gpus"][0]["mig_mode"], out["gpus"][0]["ecc_enabled"]
    ({'gen_current': 1, 'gen_max': 4, 'width_current': 16, 'width_max': 16}, None, True)
    >>> parse_smi_query("No devices were found")
    {'driver_version': None, 'gpus': []}
    """
    driver, gpus = None, []
    for line in (text or "").splitlines():
        row = dict(zip(SMI_FIELDS, (_smi_value(v) for v in line.split(","))))
        if _int(row.get("index")) is None:
            continue
        memory = _int(row.get("memory.total"))
        driver = driver or row.get("driver_version")
        gpus.append({
            "index": _int(row["index"]), "name": row.get("name"), "uuid": row.get("uuid"),
            "pci_bus_id": normalize_bus_id(row.get("pci.bus_id")),
            "memory_total_bytes": memory * 1024 * 1024 if memory is not None else None,
            "numa_node": None, "cpu_affinity": None,
            "pcie": {"gen_current": _int(row.get("pcie.link.gen.current")),
                     "gen_max": _int(row.get("pcie.link.gen.max")),
                     "width_current": _int(row.get("pcie.link.width.current")),
                     "width_max": _int(row.get("pcie.link.width.max"))},
            "persistence_mode": _enabled(row.get("persistence_mode")),
            "mig_mode": _enabled(row.get("mig.mode.current")),
            "ecc_enabled": _enabled(row.get("ecc.mode.current")), "nvlinks": None,
        })
    return {"driver_version": driver, "gpus": gpus}


def parse_topo_matrix(text: str) -> dict[str, Any]:
    """``nvidia-smi topo -m`` (or ``topo -p2p r``) -> labels, square matrix, NIC legend, affinity.

    Trimmed (two GPUs, one NIC) from a recorded driver R535+ output, which is
    tab-separated with a ``GPU NUMA ID`` column; tests/fixtures/hosts/h100-ib-8gpu holds a
    recorded space-padded copy of a whole 8x H100 matrix.

    Reads tab-separated output as printed and space-padded copies; strips the ANSI underline.
    Old drivers name NIC columns by device (``mlx5_0``); those become ``NIC<k>`` with the name
    in ``nics``, as newer drivers print. Anything unreadable is left out, never raised.

    >>> t = parse_topo_matrix('''\\tGPU0\\tGPU1\\tNIC0\\tCPU Affinity\\tNUMA Affinity\\tGPU NUMA ID
    ... GPU0\\t X \\tNV18\\tPIX\\t0-47,96-143\\t0\\t\\tN/A
    ... GPU1\\tNV18\\t X \\tNODE\\t0-47,96-143\\t0\\t\\tN/A
    ... NIC0\\tPIX\\tNODE\\t X
    ...
    ... NIC Legend:
    ...
    ...   NIC0: mlx5_0''')
    >>> t["labels"], t["matrix"][0], t["nics"]
    (['GPU0', 'GPU1', 'NIC0'], ['X', 'NV18', 'PIX'], {'NIC0': 'mlx5_0'})
    >>> t["cpu_affinity"]["GPU1"], t["numa_affinity"]["GPU0"]
    ('0-47,96-143', 0)
    >>> parse_topo_matrix("NVIDIA-SMI has failed")["labels"]
    []
    """
    lines = _ANSI.sub("", text or "").splitlines()
    legend = dict(m.groups() for m in (re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", ln) for ln in lines)
                  if m)
    out: dict[str, Any] = {"labels": [], "matrix": [], "nics": {}, "cpu_affinity": {},
                           "numa_affinity": {}}
    at = next((k for k, ln in enumerate(lines) if ln.split()[:1] == ["GPU0"]
               and ln.split()[1:2] != ["X"]), None)
    if at is None:
        return out
    labels = lines[at].split("CPU Affinity")[0].split()
    columns = [c for c in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if c in lines[at]]
    rows: dict[str, list[Optional[str]]] = {}
    for line in lines[at + 1:]:
        tabbed = "\t" in line
        fields = [f.strip() for f in (line.split("\t") if tabbed else line.split())]
        if not fields or fields[0] not in labels:
            continue
        label, cells, extras = fields[0], fields[1:len(labels) + 1], fields[len(labels) + 1:]
        rows[label] = [c or None for c in cells] + [None] * (len(labels) - len(cells))
        if label.startswith("GPU") and extras and columns:
            # Only CPU Affinity can be blank (a cpuset without the GPU's CPUs): tabs keep it as
            # an empty field; a space-padded copy loses it, so it is the one missing.
            extras = extras[:1] + [e for e in extras[1:] if e] if tabbed else \
                [""] * max(0, len(columns) - len(extras)) + extras
            values = dict(zip(columns, extras))
            out["cpu_affinity"][label] = values.get("CPU Affinity") or None
            out["numa_affinity"][label] = _int(values.get("NUMA Affinity"))
    nic_names = [lb for lb in labels if not lb.startswith("GPU")]
    rename = {lb: lb if re.fullmatch(r"NIC\d+", lb) else f"NIC{k}"
              for k, lb in enumerate(nic_names)}
    out["nics"] = {rename[lb]: legend.get(lb, None if lb == rename[lb] else lb)
                   for lb in nic_names}
    out["labels"] = [rename.get(lb, lb) for lb in labels]
    out["matrix"] = [rows.get(lb, [None] * len(labels)) for lb in labels]
    return out


def _run_smi(host: Host, args: list[str], errors: list[str]) -> Optional[CommandResult]:
    result = host.run(["nvidia-smi", *args], timeout=SMI_TIMEOUT_S)
    if result.ok:
        return result
    if result.returncode is not None or result.timed_out:
        errors.append(result.why_failed())
    return None


def _from_smi(host: Host, errors: list[str]) -> tuple[Optional[dict[str, Any]], CommandResult]:
    """The nvidia-smi fallback: (data or None, the --query-gpu result)."""
    query = host.run(SMI_QUERY, timeout=SMI_TIMEOUT_S)
    if not query.ok:
        return None, query
    parsed = parse_smi_query(query.stdout)
    gpus = parsed["gpus"]
    banner = _run_smi(host, [], errors)
    p2p: dict[str, Any] = {"labels": [f"GPU{g['index']}" for g in gpus]}
    for key, flag in (("read", "r"), ("write", "w")):
        result = _run_smi(host, ["topo", "-p2p", flag], errors)
        if result is not None:
            p2p[key] = parse_topo_matrix(result.stdout)["matrix"]
    return {"source": "nvidia-smi", "driver_version": parsed["driver_version"],
            "cuda_driver_version": parse_cuda_version(banner.stdout) if banner else None,
            "kernel_module": None, "count": len(gpus), "gpus": gpus,
            "topology": None, "p2p": p2p if gpus else None,
            "p2p_all_supported": None, "nvlink_all_pairs": None}, query


def _merge_topo(data: dict[str, Any], topo: dict[str, Any]) -> None:
    """Add topo -m's NIC rows/columns and CPU affinity to the GPU block we already have."""
    gpu_labels = [f"GPU{g['index']}" for g in data["gpus"]]
    ours = data.get("topology") or {"labels": gpu_labels, "matrix": [[None] * len(gpu_labels)
                                                                     for _ in gpu_labels]}
    theirs = {lb: row for lb, row in zip(topo["labels"], topo["matrix"])}
    labels = gpu_labels + [lb for lb in topo["labels"] if not lb.startswith("GPU")]

    def cell(a: str, b: str) -> Optional[str]:
        if a in ours["labels"] and b in ours["labels"]:
            mine = ours["matrix"][ours["labels"].index(a)][ours["labels"].index(b)]
            if mine is not None:
                return mine
        row = theirs.get(a)
        return row[topo["labels"].index(b)] if row and b in topo["labels"] else None

    data["topology"] = {"labels": labels, "matrix": [[cell(a, b) for b in labels] for a in labels],
                        "nics": topo["nics"]}
    for gpu, label in zip(data["gpus"], gpu_labels):
        gpu["cpu_affinity"] = topo["cpu_affinity"].get(label)
        gpu["numa_node"] = topo["numa_affinity"].get(label)
