"""`probe` assembles sections; a failing section is data, never a crash; secrets never leak."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck import probe
from ncclcheck.errors import BadInput
from ncclcheck.host.live import LiveHost
from ncclcheck.host.protocol import Unavailable
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.rules import NODE_RULES
from ncclcheck.rules.engine import evaluate

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def test_failing_section_does_not_stop_the_others(monkeypatch):
    from ncclcheck import probes

    def broken(host, errors):
        raise KeyError("boom")

    def absent(host, errors):
        raise Unavailable("no such subsystem")

    monkeypatch.setitem(probes.PROBES, "gpu", broken)
    monkeypatch.setitem(probes.PROBES, "ib", absent)
    doc = probe.collect_facts(LiveHost())
    gpu, ib, limits = (doc["sections"][n] for n in ("gpu", "ib", "limits"))
    assert gpu["status"] == "error" and gpu["errors"] == ["KeyError: 'boom'"]
    assert ib["status"] == "unavailable" and ib["errors"] == ["no such subsystem"]
    assert limits["status"] == "ok" and limits["data"]["memlock"]
    for sec in doc["sections"].values():
        assert set(sec) == {"status", "duration_s", "sources", "errors", "data"}


def test_only_validates_names():
    assert probe.select(["ib", "host"]) == ["host", "ib"]
    with pytest.raises(BadInput, match="unknown section gpux"):
        probe.select(["gpux"])


def test_planted_secret_never_appears(tmp_path):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="=eth0", MY_API_TOKEN="planted-s3cret-value",
               AWS_SECRET_ACCESS_KEY="planted-s3cret-value", TORCH_NCCL_BLOCKING_WAIT="1")
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--json"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "planted-s3cret-value" not in out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["sections"]["env"]["data"]["nccl"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    tables = subprocess.run([sys.executable, "-m", "ncclcheck", "probe"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert "planted-s3cret-value" not in tables.stdout + tables.stderr
    rec = tmp_path / "rec"
    subprocess.run([sys.executable, "-m", "ncclcheck", "record", str(rec)], env=env,
                   capture_output=True, text=True, timeout=60, check=True)
    for path in rec.rglob("*"):
        if path.is_file():
            assert "planted-s3cret-value" not in path.read_text(errors="replace"), path


# -- the node rules `probe` runs: every fixture node on its own -----------------------------------
FACTS = Path(__file__).parent / "fixtures" / "facts"


def fixture_nodes(rule_id: str, kind: str) -> list[dict]:
    data = json.loads((FACTS / f"{rule_id}.{kind}.json").read_text())
    return data if isinstance(data, list) else [data]


@pytest.mark.parametrize("rule", NODE_RULES, ids=lambda r: r.id)
def test_each_fail_node_fires_and_each_pass_node_is_quiet(rule):
    """Node by node: a pass node without RDMA or GPUs is quiet, not skipped."""
    for kind in ("pass", "fail"):
        for node in fixture_nodes(rule.id, kind):
            result = evaluate([rule], [node])
            assert (result["errors"], result["skipped"]) == ([], []), (kind, node["hostname"])
            assert bool(result["findings"]) == (kind == "fail"), (kind, node["hostname"])
            for finding in result["findings"]:
                assert finding["message"] and finding["fix"] and finding["why"]
                assert finding["docs"].startswith("https://")


def severities(rule, kind="fail") -> dict[str, str]:
    return {n["hostname"]: f["severity"] for n in fixture_nodes(rule.id, kind)
            for f in evaluate([rule], [n])["findings"]}


def test_memlock_is_an_error_unless_the_process_may_pin_past_it():
    from ncclcheck.rules import limits_memlock_limited

    got = severities(limits_memlock_limited.RULE)
    assert got == {"node-01": "error", "node-root-with-ipc-lock": "warning"}


def test_shm_severity_follows_the_size():
    from ncclcheck.rules import limits_shm_too_small

    got = severities(limits_shm_too_small.RULE)
    assert got == {"node-01": "error", "node-k8s-256m": "warning", "node-no-shm": "error"}


def test_ibverbs_finding_names_what_is_missing():
    from ncclcheck.rules import nccl_ibverbs_unloadable

    messages = {n["hostname"]: f["message"] for n in fixture_nodes(nccl_ibverbs_unloadable.RULE.id,
                                                                    "fail")
                for f in evaluate([nccl_ibverbs_unloadable.RULE], [n])["findings"]}
    assert "libibverbs does not load" in messages["node-01"]
    assert "providers that do not load: mlx5" in messages["node-no-provider"]
    assert "/dev/infiniband is not visible" in messages["node-container-without-devices"]


def test_several_versions_name_what_torch_and_other_programs_load():
    from ncclcheck.rules import nccl_version_multiple

    [node] = fixture_nodes(nccl_version_multiple.RULE.id, "fail")
    [finding] = evaluate([nccl_version_multiple.RULE], [node])["findings"]
    assert finding["message"].startswith("2 NCCL versions on this node: 2.18.3 (")
    assert "torch loads 2.21.5" in finding["message"]
    assert "(nccl-tests) get 2.18.3 from /usr/lib/x86_64-linux-gnu/libnccl.so.2" in \
        finding["message"]


@pytest.mark.parametrize("host, expected", [
    ("h100-ib-8gpu", {"nccl-version-multiple": "warning"}),
    ("a100-roce-bond", {"limits-memlock-limited": "error", "limits-shm-too-small": "error",
                        "ib-roce-lossless": "warning",  # NCCL_IB_TC unset, PFC on priority 3
                        "ib-gdr-not-ready": "warning", "nccl-version-multiple": "warning",
                        "gpu-nic-affinity": "warning"}),  # 535 (12.2) with cu124: a minor gap
    ("cloud-vm-1nic", {"limits-shm-too-small": "error"}),
    ("this-machine", {"nccl-ras-diagnostics": "info"}),  # its NCCL 2.32.3 has diagnostics
    # a real H200 VM: a system 2.28.3 beside torch's 2.28.9 wheel (patch level only: info)
    # and its hostname on 127.0.0.1 (cloud-init) with nothing multi-node: info
    ("h200-vm-1gpu", {"nccl-version-multiple": "info", "host-hostname-loopback": "info"}),
])
def test_recorded_hosts_get_exactly_their_findings(host, expected):
    doc = probe.collect_facts(RecordedHost(HOSTS / host))
    assert {f["rule"]: f["severity"] for f in doc["findings"]} == expected
    assert doc["skipped"] == [] and doc["rule_errors"] == []


def test_cluster_node_findings_give_message_and_fix_at_80_columns(tmp_path):
    """probe --hostfile/--from: each node finding with its one-line message and its fix under
    it, as a single-node probe prints it; not an id and a count (issue 27 item 9)."""
    root = Path(__file__).parent / "fixtures" / "hosts"
    expected = {}
    for name, host in (("node-a", "a100-roce-bond"), ("node-b", "a100-roce-bond"),
                       ("node-c", "cloud-vm-1nic")):
        doc = probe.collect_facts(RecordedHost(str(root / host)))
        doc["hostname"] = name
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        for f in doc["findings"]:
            expected[f["rule"]] = f
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--from", str(tmp_path)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    for rule, f in expected.items():
        assert " ".join(f["message"].split()) in flat, (rule, out.stdout)
        assert "fix " + " ".join(f["fix"].split()) in flat, (rule, out.stdout)
    assert "node-a, node-b: memlock is limited" in flat
    assert "(3 nodes)" in flat and "limits-shm-too-small" in flat
    assert not [ln for ln in out.stdout.splitlines()
                if len(ln) > 80 and not ln.startswith("see ")], out.stdout
