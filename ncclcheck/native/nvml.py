"""The ``nvml`` query: one JSON snapshot of what the gpu probe needs from NVML.

:func:`snapshot` runs this file as a child Python process with a deadline, so a wedged driver
(a GPU fallen off the bus can block NVML for minutes) cannot hang the probe, and NVML state is
never shared with the caller (NVML must not cross ``fork()``). The child imports only the
standard library and ``pynvml`` (from ``nvidia-ml-py``), and prints one JSON object.

Every per-field call goes through :func:`_safe`: ``NotSupported``, ``FunctionNotFound``,
``NoPermission`` and the like give ``null`` plus a note in the device's ``errors``; they never
abort the snapshot. The answer, raw but JSON-able (interpreted by
:func:`ncclcheck.probes.gpu.nvml.parse_nvml`)::

    {"driver_version": "580.95.05", "cuda_driver_version": 13000, "nvml_version": "13.580.95.05",
     "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
                  "pci_bus_id": "00000000:18:00.0", "memory_total_bytes": 85520809984,
                  "numa_node_id": null, "pcie_gen_current": 5, "pcie_gen_max": 5,
                  "pcie_width_current": 16, "pcie_width_max": 16, "persistence_mode": 1,
                  "mig_mode": [0, 0], "ecc_mode": [1, 1], "nvlink_count": 18,
                  "nvlinks": [{"link": 0, "state": 1, "remote_pci_bus_id": "00000000:07:00.0",
                               "remote_device_type": 2}, ...],
                  "errors": {"numa_node_id": "NotSupported"}}, ...],
     "topology": [[null, 40, ...], ...],         # nvmlDeviceGetTopologyCommonAncestor, i != j
     "p2p": {"read": [[null, 0, ...], ...], "write": ..., "nvlink": ..., "atomics": ...,
             "pci": ...}}                         # nvmlDeviceGetP2PStatus, NVML_P2P_STATUS_*

Where libnvidia-ml cannot be loaded, or the kernel driver is not loaded, the query raises
``QueryFailed("no NVIDIA driver: ...")``. NVML reads the machine this process runs on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

TIMEOUT_S = 30.0

#: ``nvmlDeviceGetP2PStatus`` capability indexes. Literal ints on purpose: the bindings define
#: ``NVML_P2P_CAPS_INDEX_READ = 0,`` (a tuple, because of a stray comma).
P2P_INDEXES = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}

#: Init failures that mean "there is no usable NVIDIA driver here" rather than "it is broken".
_NO_DRIVER = ("LibraryNotFound", "DriverNotLoaded")


def snapshot(host: Any = None, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """Run the NVML snapshot in a child process; raise ``QueryFailed`` when it cannot answer."""
    from ncclcheck.errors import QueryFailed

    argv = [sys.executable, os.path.abspath(__file__)]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, cwd="/",
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        raise QueryFailed(f"nvml: no answer within {timeout:g}s (hung GPU driver?)") from exc
    except OSError as exc:
        raise QueryFailed(f"nvml: cannot start {sys.executable}: {exc}") from exc
    try:
        answer = json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        why = tail[-1][:200] if tail else "no output"
        raise QueryFailed(f"nvml: query process exited {proc.returncode}: {why}") from None
    if not isinstance(answer, dict):
        raise QueryFailed("nvml: query process printed no JSON object")
    if "__error__" in answer:
        raise QueryFailed(str(answer["__error__"]))
    return answer


def _error_name(exc: BaseException) -> str:
    """``NVMLError_NotSupported`` -> ``NotSupported``; other exceptions -> their type name."""
    name = type(exc).__name__
    return name[len("NVMLError_"):] if name.startswith("NVMLError_") else name


def _safe(errors: dict[str, str], key: str, fn: Any, *args: Any) -> Any:
    """Call one NVML function; on any failure note it under ``key`` and return None."""
    try:
        return fn(*args)
    except Exception as exc:  # one unsupported field never aborts the snapshot
        errors[key] = _error_name(exc)
        return None


def _text(value: Any) -> Any:
    """NVML strings arrive as ``bytes`` from ctypes structures and ``str`` from the bindings."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _nvlinks(nv: Any, handle: Any, count: int | None) -> list[dict[str, Any]]:
    """Every NVLink of one GPU: state, and the remote end of the active ones.

    Without a link count (field 91), probe link indexes until NVML rejects one: the bindings'
    ``NVML_NVLINK_MAX_LINKS`` (36) is more than any GPU has.
    """
    links: list[dict[str, Any]] = []
    for link in range(count if count is not None else nv.NVML_NVLINK_MAX_LINKS):
        try:
            state = nv.nvmlDeviceGetNvLinkState(handle, link)
        except Exception as exc:
            if count is None:
                break
            links.append({"link": link, "state": None, "error": _error_name(exc)})
            continue
        entry: dict[str, Any] = {"link": link, "state": int(state)}
        if state:
            errors: dict[str, str] = {}
            pci = _safe(errors, "remote_pci", nv.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
            entry["remote_pci_bus_id"] = _text(pci.busId) if pci is not None else None
            entry["remote_device_type"] = _safe(
                errors, "remote_type", nv.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
            if errors:
                entry["errors"] = errors
        links.append(entry)
    return links


def _device(nv: Any, index: int, handle: Any) -> dict[str, Any]:
    """One GPU's fields; each failed call is None with its error name in ``errors``."""
    errors: dict[str, str] = {}

    def get(key: str, fn: Any, *args: Any) -> Any:
        return _safe(errors, key, fn, handle, *args)

    pci = get("pci_bus_id", nv.nvmlDeviceGetPciInfo)
    memory = get("memory_total_bytes", nv.nvmlDeviceGetMemoryInfo)
    mig = get("mig_mode", nv.nvmlDeviceGetMigMode)
    ecc = get("ecc_mode", nv.nvmlDeviceGetEccMode)
    count = None
    fields = get("nvlink_count", nv.nvmlDeviceGetFieldValues, [nv.NVML_FI_DEV_NVLINK_LINK_COUNT])
    if fields is not None:
        if fields[0].nvmlReturn == nv.NVML_SUCCESS:
            count = int(fields[0].value.uiVal)
        else:
            errors["nvlink_count"] = f"nvmlReturn {fields[0].nvmlReturn}"
    return {
        "index": index,
        "name": _text(get("name", nv.nvmlDeviceGetName)),
        "uuid": _text(get("uuid", nv.nvmlDeviceGetUUID)),
        "pci_bus_id": _text(pci.busId) if pci is not None else None,
        "memory_total_bytes": int(memory.total) if memory is not None else None,
        "numa_node_id": get("numa_node_id", nv.nvmlDeviceGetNumaNodeId),
        "pcie_gen_current": get("pcie_gen_current", nv.nvmlDeviceGetCurrPcieLinkGeneration),
        "pcie_gen_max": get("pcie_gen_max", nv.nvmlDeviceGetMaxPcieLinkGeneration),
        "pcie_width_current": get("pcie_width_current", nv.nvmlDeviceGetCurrPcieLinkWidth),
        "pcie_width_max": get("pcie_width_max", nv.nvmlDeviceGetMaxPcieLinkWidth),
        "persistence_mode": get("persistence_mode", nv.nvmlDeviceGetPersistenceMode),
        "mig_mode": [int(v) for v in mig] if mig is not None else None,
        "ecc_mode": [int(v) for v in ecc] if ecc is not None else None,
        "nvlink_count": count,
        "nvlinks": _nvlinks(nv, handle, count),
        "errors": errors,
    }


def _pairwise(handles: list[Any], fn: Any, *args: Any) -> list[list[Any]]:
    """An n x n matrix of ``fn(h_i, h_j, *args)``; None on the diagonal and on failure."""
    unused: dict[str, str] = {}
    return [[None if i == j else _safe(unused, "pair", fn, a, b, *args)
             for j, b in enumerate(handles)] for i, a in enumerate(handles)]


def collect_snapshot(nv: Any) -> dict[str, Any]:
    """Everything :func:`snapshot` answers, from an imported ``pynvml`` module ``nv``."""
    try:
        nv.nvmlInit()
    except Exception as exc:
        name = _error_name(exc)
        what = "no NVIDIA driver" if name in _NO_DRIVER else "NVML init failed"
        return {"__error__": f"{what}: {exc}"}
    try:
        errors: dict[str, str] = {}
        count = _safe(errors, "device_count", nv.nvmlDeviceGetCount) or 0
        handles, devices = [], []
        for index in range(count):
            handle = _safe(errors, f"handle{index}", nv.nvmlDeviceGetHandleByIndex, index)
            if handle is not None:
                handles.append(handle)
                devices.append(_device(nv, index, handle))
        return {
            "driver_version": _text(_safe(errors, "driver_version", nv.nvmlSystemGetDriverVersion)),
            "cuda_driver_version": _safe(errors, "cuda_driver_version",
                                         nv.nvmlSystemGetCudaDriverVersion),
            "nvml_version": _text(_safe(errors, "nvml_version", nv.nvmlSystemGetNVMLVersion)),
            "device_count": count,
            "devices": devices,
            "topology": _pairwise(handles, nv.nvmlDeviceGetTopologyCommonAncestor),
            "p2p": {name: _pairwise(handles, nv.nvmlDeviceGetP2PStatus, index)
                    for name, index in P2P_INDEXES.items()},
            "errors": errors,
        }
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: S110 - nothing more to do at shutdown
            pass


def _main() -> int:
    """Child-process entry point: print the snapshot (or ``{"__error__": ...}``) as JSON."""
    try:
        import pynvml
    except ImportError as exc:
        answer: dict[str, Any] = {"__error__": f"nvml: cannot import pynvml ({exc}); "
                                                "install nvidia-ml-py"}
    else:
        answer = collect_snapshot(pynvml)
    sys.stdout.write(json.dumps(answer, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
