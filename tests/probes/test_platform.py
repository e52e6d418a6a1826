"""platform probe: ACS on the bridges above a GPU, IOMMU groups, fabric state, replayed through
the rooted reader from a recorded-host folder. The lspci and nvidia-smi outputs are real ones
published by their owners (tests/fixtures/platform/SOURCES.md: ROCm/rccl#547 and
microsoft/openvmm#3461 for ACS on/off, NVIDIA/gpu-operator#2511 and a blog for the fabric state);
the sysfs scaffolding around them (class, vendor, links, iommu group) and the cmdline are ours."""

from __future__ import annotations

import json
from pathlib import Path

from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probes import platform
from ncclcheck.rules import NODE_RULES
from ncclcheck.rules.engine import evaluate

GPU, NIC = "0000:4a:00.0", "0000:45:00.0"
REAL = Path(__file__).parent.parent / "fixtures" / "platform"
LSPCI_ON = (REAL / "lspci-acs-on.rccl-547.txt").read_text()
LSPCI_OFF = (REAL / "lspci-acs-off.openvmm-3461.txt").read_text()
STUCK = (REAL / "fabric-in-progress.gpu-operator-2511.txt").read_text()
DONE = (REAL / "fabric-completed.lucien-549.txt").read_text()


def on_switch_port(text: str) -> str:
    """The recorded GPP bridge's block again as the switch downstream port 44:00.0 above the
    GPU and the NIC (ours: the poster did not print the switch's ports)."""
    return text + text.replace("40:01.1 PCI bridge", "44:00.0 PCI bridge", 1)


def host_folder(tmp_path: Path, acs_on: bool, fabric: str, fm: str, group: str,
                lspci: str | None = None) -> Path:
    files = {
        "root/proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia ro intel_iommu=on\n",
        "root/proc/cpuinfo": "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr\n",
        f"root/sys/bus/pci/devices/{GPU}/class": "0x030200\n",
        f"root/sys/bus/pci/devices/{GPU}/vendor": "0x10de\n",
        f"root/sys/bus/pci/devices/{NIC}/class": "0x020700\n",
        f"root/sys/bus/pci/devices/{NIC}/vendor": "0x15b3\n",
        "root/sys/kernel/iommu_groups/41/type": f"{group}\n",
        "commands/lspci_-D_-vvv.txt": lspci or (LSPCI_ON if acs_on else LSPCI_OFF),
        "commands/nvidia-smi_-q.txt": fabric,
        "commands/systemctl_is-active_nvidia-fabricmanager.txt": f"{fm}\n",
        "commands/systemctl_is-active_nvidia-fabricmanager.json": json.dumps(
            {"returncode": 0 if fm == "active" else 3}),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    top = "../../../devices/pci0000:40/0000:40:01.1/0000:43:00.0/0000:44:00.0"
    (tmp_path / "links.json").write_text(json.dumps({
        f"sys/bus/pci/devices/{GPU}": f"{top}/{GPU}", f"sys/bus/pci/devices/{NIC}": f"{top}/{NIC}",
        f"sys/bus/pci/devices/{GPU}/iommu_group": "../../../../kernel/iommu_groups/41",
        f"sys/bus/pci/devices/{NIC}/iommu_group": "../../../../kernel/iommu_groups/41"}))
    return tmp_path


def findings(data: dict) -> dict[str, list[str]]:
    doc = {"hostname": "hgx", "sections": {"platform": {"status": "ok", "data": data},
                                           "gpu": {"status": "unavailable", "data": None}}}
    out: dict[str, list[str]] = {}
    for f in evaluate([r for r in NODE_RULES if r.id.startswith("platform-")], [doc])["findings"]:
        out.setdefault(f["rule"], []).append(f["severity"])
    return out


def test_acs_translated_iommu_and_stopped_fabric_manager(tmp_path):
    folder = host_folder(tmp_path, True, STUCK, "inactive", "DMA-FQ")
    errors: list[str] = []
    data = platform.collect(RecordedHost(folder), errors)
    assert errors == []
    assert data["virtualized"] is False and data["acs_readable"] is True
    assert data["iommu"]["cmdline"] == {"intel_iommu": "on"}
    gpu = next(p for p in data["pci_paths"] if p["kind"] == "gpu")
    assert [b["bdf"] for b in gpu["bridges"]] == ["0000:40:01.1", "0000:43:00.0", "0000:44:00.0"]
    assert gpu["bridges"][0]["acs"]["ReqRedir"] is True and gpu["iommu_group_type"] == "DMA-FQ"
    assert data["fabric"] == [{"pci_bus_id": None, "state": "In Progress", "status": None,
                              "clique_id": None, "cluster_uuid": None}]
    assert data["fabric_manager"] == "inactive"
    # ACS on the root port (AMD's GPP bridge) only: the GPU-NIC pair below the switch does not
    # pass through it, and NCCL's docs ask to disable ACS on switches (issue 23)
    assert findings(data) == {"platform-acs-iommu": ["warning"],
                              "platform-fabric-not-ready": ["error"]}


def test_acs_on_the_switch_port_between_gpu_and_nic_is_an_error(tmp_path):
    folder = host_folder(tmp_path, True, DONE, "active", "identity", on_switch_port(LSPCI_ON))
    data = platform.collect(RecordedHost(folder), [])
    assert findings(data) == {"platform-acs-iommu": ["error"]}


def test_healthy_platform_is_quiet(tmp_path):
    folder = host_folder(tmp_path, False, DONE, "active", "identity")
    data = platform.collect(RecordedHost(folder), [])
    assert data["fabric_manager"] == "active"
    assert findings(data) == {}
