"""The nvml native query: the real child process on this machine, its deadline, and the
snapshot's shape from the real pynvml bindings over a stand-in for libnvidia-ml (no GPU here)."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pynvml
import pytest

from ncclcheck.errors import QueryFailed
from ncclcheck.native import nvml
from ncclcheck.probes.gpu.nvml import parse_nvml

HAS_DRIVER = bool(shutil.which("nvidia-smi")) or Path("/proc/driver/nvidia/version").exists()


@pytest.mark.skipif(HAS_DRIVER, reason="this machine has an NVIDIA driver")
def test_snapshot_without_driver_says_no_driver():
    with pytest.raises(QueryFailed, match=r"^no NVIDIA driver: NVML Shared Library Not Found"):
        nvml.snapshot(None)


@pytest.mark.skipif(not HAS_DRIVER, reason="needs an NVIDIA driver")
def test_snapshot_with_driver_lists_gpus():
    snap = nvml.snapshot(None)
    assert snap["devices"] and snap["driver_version"]
    assert parse_nvml(snap)["count"] == len(snap["devices"])


def fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_hung_query_is_killed_at_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "exec sleep 30"))
    with pytest.raises(QueryFailed, match=r"no answer within 0.5s"):
        nvml.snapshot(None, timeout=0.5)


def test_query_that_prints_no_json_is_a_clear_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "echo boom >&2; exit 3"))
    with pytest.raises(QueryFailed, match=r"query process exited 3: boom"):
        nvml.snapshot(None)


def test_safe_turns_a_real_nvml_error_into_none():
    errors: dict[str, str] = {}
    assert nvml._safe(errors, "count", pynvml.nvmlDeviceGetCount) is None  # NVML not initialised
    assert errors == {"count": "Uninitialized"}


class StandIn:
    """The nvidia-ml-py API over two NVLink-bridged GPUs, answering with the bindings' own
    structures and raising the bindings' own error classes (what libnvidia-ml would do)."""

    def __init__(self, init_error: int | None = None, field_values: bool = True) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVML", "NVMLError")):
                setattr(self, name, getattr(pynvml, name))
        self.init_error, self.field_values = init_error, field_values
        self.calls: list[tuple] = []
        self.shut_down = False

    def _err(self, code: int):
        return pynvml.NVMLError(code)

    def nvmlInit(self):
        if self.init_error is not None:
            raise self._err(self.init_error)

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlSystemGetDriverVersion(self):
        return "535.183.01"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12020

    def nvmlSystemGetNVMLVersion(self):
        raise self._err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def nvmlDeviceGetPciInfo(self, h):
        info = pynvml.nvmlPciInfo_t()
        info.busId = b"00000000:%02X:00.0" % (0x17 + h)
        return info

    def nvmlDeviceGetMemoryInfo(self, h):
        memory = pynvml.c_nvmlMemory_t()
        memory.total = 81920 * 2**20
        return memory

    def nvmlDeviceGetName(self, h):
        return "NVIDIA A100 80GB PCIe"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetNumaNodeId(self, h):
        raise self._err(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 4

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetCurrPcieLinkWidth

    def nvmlDeviceGetPersistenceMode(self, h):
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetMigMode(self, h):
        return [0, 0]

    def nvmlDeviceGetEccMode(self, h):
        return [1, 1]

    def nvmlDeviceGetFieldValues(self, h, ids):
        if not self.field_values:
            raise self._err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        values = (pynvml.c_nvmlFieldValue_t * len(ids))()
        values[0].fieldId, values[0].nvmlReturn = ids[0], pynvml.NVML_SUCCESS
        values[0].value.uiVal = 4
        return values

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= 4:
            raise self._err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return 0 if link == 3 else 1  # one bridge lane down

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        return self.nvmlDeviceGetPciInfo(1 - h)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        return pynvml.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return pynvml.NVML_TOPOLOGY_SYSTEM

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        self.calls.append(("p2p", index))
        if not isinstance(index, int):
            raise TypeError("p2p index must be an int")
        if index == 4:
            raise self._err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_P2P_STATUS_OK


@pytest.mark.parametrize("field_values", [True, False])
def test_snapshot_shape_through_the_bindings(field_values):
    nv = StandIn(field_values=field_values)
    snap = nvml.collect_snapshot(nv)
    assert nv.shut_down
    dev = snap["devices"][0]
    assert dev["pci_bus_id"] == "00000000:17:00.0" and dev["memory_total_bytes"] == 81920 * 2**20
    assert dev["numa_node_id"] is None and dev["errors"]["numa_node_id"] == "NotSupported"
    assert [lk["state"] for lk in dev["nvlinks"]] == [1, 1, 1, 0]
    assert dev["nvlinks"][0]["remote_pci_bus_id"] == "00000000:18:00.0"
    assert snap["errors"] == {"nvml_version": "FunctionNotFound"}
    assert {index for _, index in nv.calls} == {0, 1, 2, 3, 4}
    assert snap["p2p"]["pci"] == [[None, None], [None, None]]
    data = parse_nvml(snap)
    assert data["topology"]["matrix"] == [["X", "NV3"], ["NV3", "X"]]
    assert data["p2p"]["read"] == [["X", "OK"], ["OK", "X"]]
    assert data["gpus"][1]["nvlinks"][0]["remote_gpu_index"] == 0
    assert data["gpus"][0]["persistence_mode"] is True and data["gpus"][0]["mig_mode"] is False


@pytest.mark.parametrize("code, message", [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no NVIDIA driver: Driver Not Loaded"),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver: NVML Shared Library Not Found"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML init failed: RM has detected an NVML/RM"),
])
def test_init_failures(code, message):
    nv = StandIn(init_error=code)
    answer = nvml.collect_snapshot(nv)
    assert answer["__error__"].startswith(message) and not nv.shut_down


def test_child_entry_point_prints_one_json_object(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace())  # no nvmlInit at all
    assert nvml._main() == 0
    assert capsys.readouterr().out.startswith('{"__error__": "NVML init failed: ')
