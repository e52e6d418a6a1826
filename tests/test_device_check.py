"""scripts/device-check: its comparisons on a real H200's answers, and its CPU-only run.

The GPU parts are tested at their boundary with what a lent H200 really answered
(tests/fixtures/device/h200/, tests/fixtures/hosts/h200-vm-1gpu/): nvidia-smi's XML, NVML through
the recorded host replayed by the rooted reader, torch's NCCL version, the Flight Recorder's dumps
and the NCCL log. The script itself runs here without a GPU and must finish and write its files.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probe import collect_facts
from ncclcheck.render.bench import render_table

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device-check"
H200 = ROOT / "tests" / "fixtures" / "device" / "h200"
H200_HOST = ROOT / "tests" / "fixtures" / "hosts" / "h200-vm-1gpu"


def _load():
    loader = importlib.machinery.SourceFileLoader("ncclcheck_device_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


dc = _load()


def test_dry_run_names_every_step_and_runs_nothing(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for name, _ in dc.STEPS:
        assert f"would run step {name}" in out.stdout
    assert not (tmp_path / "o").exists()


def test_the_h200s_xml_parses_field_by_field():
    smi = dc.parse_smi_xml((H200 / "nvidia-smi-q.xml").read_text())
    assert smi["driver_version"] == "580.159.04" and smi["cuda_version"] == "13.0"
    (gpu,) = smi["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["pci_bus_id"] == "0000:00:06.0"
    assert gpu["memory_total_mib"] == 143771
    assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert (gpu["mig_mode"], gpu["ecc_enabled"], gpu["persistence_mode"]) == (False, True, True)
    assert gpu["fabric_state"] is None and gpu["max_clocks_mhz"]["sm_clock"] == 1980


def test_the_probe_replayed_agrees_with_nvidia_smi():
    facts = collect_facts(RecordedHost(H200_HOST))
    xml = (H200 / "nvidia-smi-q.xml").read_text()
    nvlink = (H200 / "nvidia-smi-nvlink-s.txt").read_text()
    rows = dc.compare_gpu(facts, dc.parse_smi_xml(xml), nvlink)
    assert [r for r in rows if r["verdict"] == "differs"] == []
    compared = {r["field"] for r in rows if r["verdict"] == "same"}
    assert {"name", "uuid", "memory_total_mib", "pcie.gen_current", "mig_mode",
            "driver_version", "fabric_state"} <= compared
    # clocks: nvidia-smi reports them and the facts do not carry them; listed, not hidden
    assert {r["field"] for r in rows if r["verdict"] == "not in probe"} >= {"clocks.sm_clock"}
    # a planted difference is found
    planted = xml.replace("<total>143771 MiB</total>", "<total>143000 MiB</total>", 1)
    differs = [r for r in dc.compare_gpu(facts, dc.parse_smi_xml(planted))
               if r["verdict"] == "differs"]
    assert [r["field"] for r in differs] == ["memory_total_mib"]


def test_every_libnccl_against_torchs_answer():
    facts = json.loads((H200 / "probe.json").read_text())
    torch_said = json.loads((H200 / "summary.json").read_text())["steps"]["nccl_libs"]
    result = dc.compare_nccl(facts, torch_said["torch_nccl_version"], torch_said["torch_loads"])
    assert result["agree"] and result["probe_version_of_torch_library"] == "2.28.9"
    assert sorted(lib["version"] for lib in result["libraries"]) == ["2.28.3", "2.28.9"]
    assert not dc.compare_nccl(facts, "2.27.3", torch_said["torch_loads"])["agree"]


def test_real_flight_recorder_dumps_read_without_running_anything(tmp_path):
    dump = dc.safe_unpickle((H200 / "fr" / "timeout_rank_0").read_bytes())
    summary = dc.fr_summary(dump)
    assert summary["version"] == "2.10" and summary["entries"] == 2
    assert summary["states"] == ["completed", "scheduled"]
    assert {"duration_ms", "time_created_ns", "time_discovered_started_ns"} <= set(
        summary["timing_keys"])
    on_demand = dc.safe_unpickle((H200 / "fr" / "on-demand.nccl.pickle").read_bytes())
    assert dc.fr_summary(on_demand)["ops"] == ["nccl:all_gather", "nccl:all_reduce",
                                               "nccl:broadcast"]
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with pytest.raises(pickle.UnpicklingError):
        dc.safe_unpickle(pickle.dumps(Evil()))
    assert not marker.exists()


def test_the_h200s_nccl_log_is_healthy_and_its_topology_read():
    doc = diagnose_files([str(H200 / "nccl-info.log")])
    assert doc["healthy"] and doc["findings"] == []
    assert doc["summary"]["nccl_versions"] == ["2.28.9"]
    (rank,) = doc["ranks"]
    assert (rank["channels"], rank["trees"], rank["nranks"]) == (64, 48, 1)
    assert rank["init_complete"] and rank["network"] == "Socket"


def test_one_rank_is_not_reported_as_a_bandwidth():
    """On the H200, 1 rank gave 'algbw' 6,146 GB/s at 128 MiB (above HBM's 4.8 TB/s): the
    one-rank all_reduce in place is a no-op in NCCL, so the footer must say so."""
    doc = json.loads((H200 / "bench.json").read_text())
    assert doc["world_size"] == 1 and doc["backend"] == "nccl" and doc["wrong_total"] == 0
    text = render_table(doc)
    assert "# One rank" in text and "Peak bus bandwidth" not in text
    assert "none between ranks (1 rank" in text
    two = {**doc, "world_size": 2}
    assert "Peak bus bandwidth" in render_table(two) and "# One rank" not in render_table(two)


@pytest.mark.slow
@pytest.mark.torch
def test_cpu_only_run_finishes_and_writes_its_files(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable, "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=400,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["artifacts.tgz", "device-check.log",
                                                      "record.tgz", "summary.json"]
    steps = json.loads((out / "summary.json").read_text())["steps"]
    assert steps["diagnose"]["status"] == "skipped" and steps["nccl_oom"]["status"] == "skipped"
    for name in ("environment", "probe", "nccl_libs", "bench", "record", "flight_recorder"):
        assert steps[name]["status"] == "ok", (name, steps[name])
    assert steps["reference"]["status"] in ("ok", "over target")  # CPU timing is noisy here
    assert steps["bench"]["backend"] == "gloo" and steps["bench"]["wrong_total"] == 0
    assert steps["flight_recorder"]["on-demand.fr.pickle"]["entries"] == 5
    with tarfile.open(out / "artifacts.tgz") as tar:
        names = tar.getnames()
    assert "artifacts/probe.json" in names and "artifacts/bench.json" in names


def test_the_h200s_out_of_memory_at_setup_gets_its_cause():
    """NCCL's communicator set-up on the H200 with its memory taken (real log and stderr)."""
    doc = diagnose_files([str(H200 / "oom" / "nccl-oom.log"), str(H200 / "oom" / "stderr.log")])
    (finding,) = doc["findings"]
    assert finding["id"] == "log-cuda-error" and finding["severity"] == "error"
    assert "memory fraction" in finding["fix"] and "NCCL_BUFFSIZE" in finding["fix"]


def test_the_h200s_watchdog_timeout_is_read_from_its_flight_recorder_dump(tmp_path):
    """The real nccl dump of an all_reduce queued behind a long kernel (timeout 5 s): the
    collective was 'scheduled' and never started on the GPU, so the verdict blames the stream,
    not the network (one rank has none)."""
    import shutil

    for name in ("timeout_rank_0", "timeout-stderr.log"):
        shutil.copy(H200 / "fr" / name, tmp_path / name)
    doc = diagnose_files([str(tmp_path)])
    desync = doc["first_desync"]
    assert (desync["op"], desync["seq"], desync["started"]) == ("all_reduce", 2, [])
    assert doc["culprits"] == [] and doc["job"]["class"] == "stream"
    assert "not the network" in doc["job"]["verdict"]
    assert "log-watchdog-timeout" in {f["id"] for f in doc["findings"]}
