"""nccl-library-missing: CPU-only nodes pass (issue 19), torch with NCCL linked in passes (17)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ncclcheck.host.live import LiveHost
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probe import collect_facts
from ncclcheck.probes.nccl.torch import _ask_torch_nccl
from ncclcheck.rules import nccl_library_missing
from ncclcheck.rules.engine import evaluate

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"


@cache
def _replayed(name):
    return json.dumps(collect_facts(RecordedHost(HOSTS / name), findings=False))


def replayed(name):
    return json.loads(_replayed(name))


def without_nccl(facts, torch_cuda=None, torch_nccl=None):
    data = facts["sections"]["nccl"]["data"]
    data["libraries"], data["versions"] = [], []
    if torch_cuda is not None:
        data["torch"]["cuda"] = torch_cuda
    data["torch_nccl"] = torch_nccl
    return facts


def findings(facts):
    result = evaluate([nccl_library_missing.RULE], [facts])
    assert result["errors"] == [] and result["skipped"] == [], result
    return result["findings"]


def test_a_cpu_only_node_is_not_warned_about_nccl():
    # this-machine was recorded without an NVIDIA driver: its gpu section is unavailable
    facts = without_nccl(replayed("this-machine"))
    assert facts["sections"]["gpu"]["status"] == "unavailable"
    assert findings(facts) == []


def test_a_gpu_node_without_nccl_is_still_an_error_with_cuda_torch():
    facts = without_nccl(replayed("h100-ib-8gpu"), torch_cuda="12.4",
                         torch_nccl={"version": None, "error": "torch.cuda.nccl.version(): x"})
    [finding] = findings(facts)
    assert finding["severity"] == "error" and "reports no NCCL of its own" in finding["message"]


def test_torch_with_nccl_linked_in_needs_no_file():
    facts = without_nccl(replayed("h100-ib-8gpu"), torch_cuda="12.4",
                         torch_nccl={"version": "2.21.5", "error": None})
    assert findings(facts) == []


def test_the_probe_asks_torch_in_a_child_interpreter():
    """The real interpreter and the real (CPU) torch of this venv: the answer is an error,
    recorded as such, never a version and never a traceback."""
    python = LiveHost("/").query("python_paths")
    site = next(p for p in python["sys_path"] if (Path(p) / "torch").is_dir())
    torch = {"cuda": "12.4", "site_packages": site, "path": str(Path(site) / "torch")}
    answer = _ask_torch_nccl(LiveHost("/"), torch, python)
    assert answer["version"] is None and answer["error"].startswith("torch.cuda.nccl.version():")
    assert _ask_torch_nccl(LiveHost("/"), {**torch, "cuda": None}, python) is None
