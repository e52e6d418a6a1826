"""gpu: the NVIDIA driver, each GPU, NVLink, and the GPU/NIC topology of ``nvidia-smi topo -m``.

Sources, best first: the ``nvml`` query (:mod:`ncclcheck.native.nvml`); ``nvidia-smi`` when NVML
cannot load (``--query-gpu`` CSV, the banner for the CUDA version, ``topo -p2p r|w``);
``nvidia-smi topo -m`` for the NIC columns and CPU/NUMA affinity; ``/proc/driver/nvidia/version``
for the kernel module; ``/sys/bus/pci/devices/<bdf>/numa_node`` for each GPU's NUMA node.
GPUs are keyed by PCI bus id (``0000:18:00.0``, sysfs spelling), never by CUDA index alone.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn, Optional, TypedDict

from ncclcheck.host import CommandResult, Host, QueryFailed, Unavailable


class Pcie(TypedDict):
    gen_current: Optional[int]
    gen_max: Optional[int]
    width_current: Optional[int]
    width_max: Optional[int]


class NvLink(TypedDict):
    link: Optional[int]
    active: Optional[bool]
    remote_pci_bus_id: Optional[str]   # normalised; an NVSwitch's bus id on HGX boards
    remote_type: Optional[str]         # "gpu" | "switch" | "npu" | None
    remote_gpu_index: Optional[int]    # set when the far end is a GPU of this node


class Gpu(TypedDict):
    index: Optional[int]
    name: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]          # "0000:18:00.0"
    memory_total_bytes: Optional[int]
    numa_node: Optional[int]           # the PCI device's node: sysfs, else topo -m
    cpu_affinity: Optional[str]        # "0-47,96-143" from topo -m
    pcie: Pcie
    persistence_mode: Optional[bool]
    mig_mode: Optional[bool]           # current mode; None where the GPU has no MIG
    ecc_enabled: Optional[bool]        # current mode; None where the GPU has no ECC
    nvlinks: Optional[list[NvLink]]    # [] without NVLink; None: unknown (nvidia-smi path)


class Topology(TypedDict):
    labels: list[str]                  # ["GPU0", ..., "NIC0", ...]
    matrix: list[list[Optional[str]]]  # X, NV18, PIX, PXB, PHB, NODE, SYS; None: unknown
    nics: dict[str, Optional[str]]     # {"NIC0": "mlx5_0"}


class GpuData(TypedDict):
    source: str                        # "nvml" | "nvidia-smi"
    driver_version: Optional[str]      # "580.95.05"
    cuda_driver_version: Optional[str]  # "13.0": the newest CUDA this driver runs
    kernel_module: Optional[dict]      # {"version": "580.95.05", "open": True}
    count: int
    gpus: list[Gpu]
    topology: Optional[Topology]
    p2p: Optional[dict]                # {"labels": [...], "read": [[...]], "write": ...}
    p2p_all_supported: Optional[bool]  # read+write P2P "OK" for every GPU pair
    nvlink_all_pairs: Optional[bool]   # every GPU pair joined by NVLink (NV#)
    # p2p cells: X, OK, CNS, GNS, TNS, NS, DR, U (topo -p2p words). The two summaries are None
    # with fewer than 2 GPUs, or when a pair is unknown and none is known to be bad.


SMI_TIMEOUT_S = 10.0
SMI_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "pcie.link.gen.current",
              "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
              "persistence_mode", "mig.mode.current", "ecc.mode.current", "driver_version")
SMI_QUERY = ["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]
#: NVML_TOPOLOGY_* levels in ``nvidia-smi topo -m`` words (INTERNAL: two GPUs on one board).
TOPOLOGY_LEVELS = {0: "INT", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: NVML_P2P_STATUS_* in ``nvidia-smi topo -p2p`` words.
P2P_STATUS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
NVLINK_REMOTE = {0: "gpu", 1: "npu", 2: "switch"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BUS_ID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def normalize_bus_id(text: Any) -> Optional[str]:
    """NVML/nvidia-smi bus id -> the sysfs spelling; None when it is not one.

    >>> normalize_bus_id("00000000:9A:00.0"), normalize_bus_id(b"0000:1b:00.0")
    ('0000:9a:00.0', '0000:1b:00.0')
    >>> normalize_bus_id("?") is None
    True
    """
    text = text.decode("ascii", "replace") if isinstance(text, bytes) else str(text or "")
    m = _BUS_ID.match(text.strip())
    return f"{int(m[1], 16):04x}:{m[2]}:{m[3]}.{m[4]}".lower() if m else None


def _int(value: Any) -> Optional[int]:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def cuda_version_text(code: Any) -> Optional[str]:
    """NVML's CUDA driver version number -> "major.minor".

    >>> cuda_version_text(12040), cuda_version_text(13000), cuda_version_text(None)
    ('12.4', '13.0', None)
    """
    code = _int(code)
    return f"{code // 1000}.{code % 1000 // 10}" if code and code > 0 else None


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


def parse_proc_version(text: str) -> Optional[dict[str, Any]]:
    """``/proc/driver/nvidia/version`` -> kernel module version, and whether it is the open one.

    Recorded on a 580.95.05 open-module install and a 535.129.03 proprietary one (below).

    >>> parse_proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  "
    ...     "Release Build  (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025")
    {'version': '580.95.05', 'open': True}
    >>> parse_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  "
    ...                    "Thu Dec  7 19:01:02 UTC 2023")
    {'version': '535.129.03', 'open': False}
    >>> parse_proc_version("") is None
    True
    """
    m = re.search(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text or "")
    return {"version": m[1], "open": "Open Kernel Module" in m[0]} if m else None


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


def _get(table: dict[int, str], value: Any) -> Optional[str]:
    return table.get(value) if isinstance(value, int) else None


def _nvml_gpu(dev: dict[str, Any], index_of: dict[str, int]) -> Gpu:
    def first(key: str) -> Optional[int]:
        value = dev.get(key)
        return _int(value[0]) if isinstance(value, list) and value else None

    links: list[NvLink] = []
    raw_links = dev.get("nvlinks") if isinstance(dev.get("nvlinks"), list) else []
    for link in (lk for lk in raw_links if isinstance(lk, dict)):
        remote = normalize_bus_id(link.get("remote_pci_bus_id"))
        state = link.get("state")
        links.append({"link": _int(link.get("link")),
                      "active": None if state is None else bool(state),
                      "remote_pci_bus_id": remote,
                      "remote_type": _get(NVLINK_REMOTE, link.get("remote_device_type")),
                      "remote_gpu_index": index_of.get(remote) if remote else None})
    persistence, mig, ecc = _int(dev.get("persistence_mode")), first("mig_mode"), first("ecc_mode")
    return {"index": _int(dev.get("index")), "name": dev.get("name"), "uuid": dev.get("uuid"),
            "pci_bus_id": normalize_bus_id(dev.get("pci_bus_id")),
            "memory_total_bytes": _int(dev.get("memory_total_bytes")),
            "numa_node": None, "cpu_affinity": None,
            "pcie": {"gen_current": _int(dev.get("pcie_gen_current")),
                     "gen_max": _int(dev.get("pcie_gen_max")),
                     "width_current": _int(dev.get("pcie_width_current")),
                     "width_max": _int(dev.get("pcie_width_max"))},
            "persistence_mode": None if persistence is None else persistence == 1,
            "mig_mode": None if mig is None else mig == 1,
            "ecc_enabled": None if ecc is None else ecc == 1, "nvlinks": links}


def _link_cell(gpus: list[Gpu], i: int, j: int, level: Any, nvlink_p2p: Any) -> Optional[str]:
    """One GPU/GPU cell as topo -m prints it: NV<links> when NVLink joins them, else PCIe.

    Direct links count the links to the peer. Through NVSwitch (or a far end NVML cannot name,
    which NCCL also takes for a hidden switch) a pair gets the smaller switch-link count.
    """
    active = [[lk for lk in gpus[k]["nvlinks"] or [] if lk["active"]] for k in (i, j)]
    direct = sum(1 for lk in active[0] if lk["remote_gpu_index"] == gpus[j]["index"])
    if direct:
        return f"NV{direct}"
    switched = min(sum(1 for lk in links if lk["remote_gpu_index"] is None) for links in active)
    if switched and nvlink_p2p in (0, None):
        return f"NV{switched}"
    return _get(TOPOLOGY_LEVELS, level)


def parse_nvml(snap: Any) -> dict[str, Any]:
    """The ``nvml`` query's snapshot -> this section's data (without NICs, NUMA and module).

    The snapshot is what :mod:`ncclcheck.native.nvml` records; the doctest is
    tests/fixtures/hosts/cloud-vm-1nic/queries/nvml.json cut to two GPUs and a few fields.

    >>> snap = {"driver_version": "535.183.01", "cuda_driver_version": 12020, "devices": [
    ...     {"index": 0, "name": "NVIDIA A10G", "pci_bus_id": "00000000:00:1B.0", "nvlinks": []},
    ...     {"index": 1, "name": "NVIDIA A10G", "pci_bus_id": "00000000:00:1C.0", "nvlinks": []}],
    ...     "topology": [[None, 30], [30, None]], "p2p": {"read": [[None, 1], [1, None]]}}
    >>> out = parse_nvml(snap)
    >>> out["cuda_driver_version"], out["topology"]["matrix"], out["p2p"]["read"][0]
    ('12.2', [['X', 'PHB'], ['PHB', 'X']], ['X', 'CNS'])
    >>> parse_nvml({})["count"], parse_nvml("garbage")["gpus"]
    (0, [])
    """
    snap = snap if isinstance(snap, dict) else {}
    devices = sorted((d for d in snap.get("devices") or [] if isinstance(d, dict)),
                     key=lambda d: _int(d.get("index")) or 0)
    index_of = {normalize_bus_id(d.get("pci_bus_id")): _int(d.get("index")) for d in devices}
    gpus = [_nvml_gpu(d, index_of) for d in devices]
    n, labels = len(gpus), [f"GPU{g['index']}" for g in gpus]
    raw_p2p = snap.get("p2p") if isinstance(snap.get("p2p"), dict) else {}

    def grid(rows: Any) -> list[list[Any]]:
        ok = isinstance(rows, list) and len(rows) == n and all(
            isinstance(r, list) and len(r) == n for r in rows)
        return rows if ok else [[None] * n for _ in range(n)]

    levels, nvlink = grid(snap.get("topology")), grid(raw_p2p.get("nvlink"))
    matrix = [["X" if i == j else _link_cell(gpus, i, j, levels[i][j], nvlink[i][j])
               for j in range(n)] for i in range(n)]
    p2p: dict[str, Any] = {"labels": labels}
    for key, rows in raw_p2p.items():
        p2p[str(key)] = [["X" if i == j else _get(P2P_STATUS, v) for j, v in enumerate(row)]
                         for i, row in enumerate(grid(rows))]
    return {"source": "nvml", "driver_version": snap.get("driver_version"),
            "cuda_driver_version": cuda_version_text(snap.get("cuda_driver_version")),
            "kernel_module": None, "count": n, "gpus": gpus,
            "topology": {"labels": labels, "matrix": matrix, "nics": {}},
            "p2p": p2p if n else None, "p2p_all_supported": None, "nvlink_all_pairs": None}


def _all_pairs(gpus: list[Gpu], matrices: list[Any], good: Any) -> Optional[bool]:
    """True if ``good(cell)`` for every GPU pair; False if one is known bad; else None."""
    n = len(gpus)
    if n < 2 or not matrices:
        return None
    cells = [m[i][j] if m and i < len(m) and j < len(m[i]) else None
             for m in matrices for i in range(n) for j in range(n) if i != j]
    if any(c is not None and not good(c) for c in cells):
        return False
    return None if any(c is None for c in cells) else True


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


def _no_answer(host: Host, nvml_error: str, query: CommandResult) -> NoReturn:
    """Neither NVML nor nvidia-smi answered: Unavailable without a driver, else an error."""
    module = parse_proc_version(host.read("proc/driver/nvidia/version") or "")
    missing = query.returncode is None and not query.timed_out
    smi = "nvidia-smi not found" if missing else query.why_failed()
    no_driver = nvml_error.startswith("no NVIDIA driver")
    if not (no_driver or (missing and not module)):
        raise QueryFailed(f"{nvml_error}; {smi}")  # a driver that is there but broken
    hint = (f"; kernel module {module['version']} is loaded: a container started without the "
            "NVIDIA runtime?") if module else ""
    detail = "" if no_driver else f"; {nvml_error}"
    raise Unavailable(f"no NVIDIA driver (libnvidia-ml not loadable, {smi}){hint}{detail}")


def collect(host: Host, errors: list[str]) -> GpuData:
    """Probe the GPUs; raise Unavailable on a machine without an NVIDIA driver."""
    try:
        snapshot = host.query("nvml")
        if not isinstance(snapshot, dict) or not isinstance(snapshot.get("devices"), list):
            raise QueryFailed("nvml: the answer is not an NVML snapshot")
        data, nvml_error = parse_nvml(snapshot), ""
    except QueryFailed as exc:
        data, nvml_error = None, str(exc)
    if data is None:
        data, query = _from_smi(host, errors)
        if data is None:
            _no_answer(host, nvml_error, query)
        errors.append(f"{nvml_error}; used nvidia-smi")
    topo = _run_smi(host, ["topo", "-m"], errors)
    if topo is not None:
        _merge_topo(data, parse_topo_matrix(topo.stdout))
    for gpu in data["gpus"]:
        sysfs = _int(host.read(f"sys/bus/pci/devices/{gpu['pci_bus_id']}/numa_node")) \
            if gpu["pci_bus_id"] else None
        if sysfs is not None:
            gpu["numa_node"] = sysfs if sysfs >= 0 else None
    module = parse_proc_version(host.read("proc/driver/nvidia/version") or "")
    loaded = (host.read("sys/module/nvidia/version") or "").strip()
    data["kernel_module"] = module or ({"version": loaded, "open": None} if loaded else None)
    p2p = data.get("p2p") or {}
    data["p2p_all_supported"] = _all_pairs(
        data["gpus"], [p2p[k] for k in ("read", "write") if k in p2p], lambda c: c == "OK")
    matrix = (data.get("topology") or {}).get("matrix") or []
    data["nvlink_all_pairs"] = _all_pairs(data["gpus"], [matrix] if matrix else [],
                                          lambda c: c.startswith("NV"))
    return data  # type: ignore[return-value]
