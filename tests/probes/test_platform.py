"""platform probe: ACS on the bridges above a GPU, IOMMU groups, fabric state, replayed through
the rooted reader from a recorded-host folder. The lspci, nvidia-smi and cmdline texts are the
samples quoted in ncclcheck/probes/platform.py, in the tools' published formats (no machine with
ACS or NVSwitches was at hand to capture them from)."""

from __future__ import annotations

import json
from pathlib import Path

from ncclcheck.host import RecordedHost
from ncclcheck.probes import platform
from ncclcheck.rules import NODE_RULES
from ncclcheck.rules.engine import evaluate

GPU, NIC = "0000:1a:00.0", "0000:1b:00.0"
LSPCI = ("0000:16:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane (rev ca)\n"
         "\tCapabilities: [f24 v1] Access Control Services\n"
         "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ "
         "DirectTrans+\n"
         "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- "
         "DirectTrans-\n\n"
         f"{GPU} 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
         "\tCapabilities: [60] Power Management version 3\n")


def host_folder(tmp_path: Path, acs_on: bool, fabric: str, fm: str, group: str) -> Path:
    files = {
        "root/proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia ro intel_iommu=on\n",
        "root/proc/cpuinfo": "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr\n",
        f"root/sys/bus/pci/devices/{GPU}/class": "0x030200\n",
        f"root/sys/bus/pci/devices/{GPU}/vendor": "0x10de\n",
        f"root/sys/bus/pci/devices/{NIC}/class": "0x020700\n",
        f"root/sys/bus/pci/devices/{NIC}/vendor": "0x15b3\n",
        "root/sys/kernel/iommu_groups/41/type": f"{group}\n",
        "commands/lspci_-D_-vvv.txt": LSPCI if acs_on else LSPCI.replace("SrcValid+ TransBlk- "
                                                                         "ReqRedir+ CmpltRedir+",
                                                                         "SrcValid- TransBlk- "
                                                                         "ReqRedir- CmpltRedir-"),
        "commands/" + "nvidia-smi_--query-gpu=pci.bus_id,fabric.state,fabric.status_"
        "--format=csv,noheader.txt": fabric,
        "commands/systemctl_is-active_nvidia-fabricmanager.txt": f"{fm}\n",
        "commands/systemctl_is-active_nvidia-fabricmanager.json": json.dumps(
            {"returncode": 0 if fm == "active" else 3}),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    top = "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0"
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
    folder = host_folder(tmp_path, True, "00000000:1A:00.0, In Progress, N/A\n", "inactive",
                         "DMA-FQ")
    errors: list[str] = []
    data = platform.collect(RecordedHost(folder), errors)
    assert errors == []
    assert data["virtualized"] is False and data["acs_readable"] is True
    assert data["iommu"]["cmdline"] == {"intel_iommu": "on"}
    gpu = next(p for p in data["pci_paths"] if p["kind"] == "gpu")
    assert [b["bdf"] for b in gpu["bridges"]] == ["0000:15:01.0", "0000:16:00.0"]
    assert gpu["bridges"][1]["acs"]["ReqRedir"] is True and gpu["iommu_group_type"] == "DMA-FQ"
    assert data["fabric"] == [{"pci_bus_id": GPU, "state": "In Progress", "status": None}]
    assert data["fabric_manager"] == "inactive"
    assert findings(data) == {"platform-acs-iommu": ["error", "warning"],
                              "platform-fabric-not-ready": ["error"]}


def test_healthy_platform_is_quiet(tmp_path):
    folder = host_folder(tmp_path, False, "00000000:1A:00.0, Completed, Success\n", "active",
                         "identity")
    data = platform.collect(RecordedHost(folder), [])
    assert data["fabric_manager"] == "active"
    assert findings(data) == {}
