"""``ncclcheck k8s label`` against a loopback HTTP server that answers as the API server does
(``/api/v1/nodes/{name}``: GET returns the Node, PATCH with application/merge-patch+json
merges; a ``metadata.resourceVersion`` in the patch that is not the current one is 409
Conflict; 403/404 are ``Status`` objects). The server records every request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakeapi import FakeAPI

PAIRWISE = Path(__file__).resolve().parent.parent / "fixtures" / "reports" / "netns-hunt" / \
    "pairwise.json"
TOKEN = "test-token-123"


@pytest.fixture
def api():
    doc = json.loads(PAIRWISE.read_text())
    fake = FakeAPI([n["host"] for n in doc["nodes"]])
    yield fake
    fake.close()


def label(tmp_path, api, *args, doc=PAIRWISE):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    return subprocess.run([sys.executable, "-m", "ncclcheck", "k8s", "label", str(doc),
                           "--api-server", api.url, "--token-file", str(token), *args],
                          capture_output=True, text=True, timeout=60)


def test_labels_are_one_merge_patch_per_node_with_the_token(tmp_path, api):
    out = label(tmp_path, api)
    assert out.returncode == 0, out.stderr
    doc = json.loads(PAIRWISE.read_text())
    assert len(api.requests) == len(doc["nodes"])
    method, path, ctype, auth, body = api.requests[0]
    assert (method, path, ctype, auth) == ("PATCH", "/api/v1/nodes/node1",
                                           "application/merge-patch+json", f"Bearer {TOKEN}")
    assert body == {"metadata": {"labels": {"ncclcheck.io/pairwise": "ok"}}}
    assert api.nodes["node5"]["metadata"]["labels"] == {"ncclcheck.io/pairwise": "slow"}


def test_taints_are_read_then_patched_and_a_409_rereads_once(tmp_path, api):
    api.conflicts["node5"] = 1
    out = label(tmp_path, api, "--taint")
    assert out.returncode == 0, out.stderr
    node5 = [r for r in api.requests if r[1] == "/api/v1/nodes/node5"]
    assert [r[0] for r in node5] == ["PATCH", "GET", "PATCH", "GET", "PATCH"]
    assert node5[2][4]["metadata"] == {"resourceVersion": "101"}   # the version read: 409
    assert node5[4][4] == {"metadata": {"resourceVersion": "102"}, "spec": {"taints": [
        {"key": "other", "effect": "NoExecute"},
        {"key": "ncclcheck.io/pairwise", "value": "slow", "effect": "NoSchedule"}]}}
    assert api.nodes["node5"]["spec"]["taints"][-1]["value"] == "slow"
    assert api.nodes["node1"]["spec"]["taints"] == [{"key": "other", "effect": "NoExecute"}]
    assert "node5: ncclcheck.io/pairwise=slow; taint ncclcheck.io/pairwise=slow:NoSchedule" \
        in out.stdout


@pytest.mark.parametrize("case", ["forbidden", "missing"])
def test_403_and_404_are_one_line_exit_1(tmp_path, api, case):
    if case == "forbidden":
        api.forbidden = True
    else:
        del api.nodes["node1"]
    out = label(tmp_path, api)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert ("HTTP 403" in lines[0] and "cannot patch" in lines[0]) if case == "forbidden" \
        else ('HTTP 404 nodes "node1" not found' in lines[0])


def test_an_invalid_label_is_exit_2_before_any_request(tmp_path, api):
    doc = json.loads(PAIRWISE.read_text())
    doc["nodes"][3]["status"] = "slow,really"     # a comma: never a label value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    out = label(tmp_path, api, doc=bad)
    if out.returncode != 2 or api.requests:  # the schema may already refuse the status
        pytest.fail(f"rc {out.returncode}, {len(api.requests)} requests: {out.stderr}")
    assert out.stderr.count("\n") == 1
    out = label(tmp_path, api, "--prefix", "Bad_Prefix")
    assert out.returncode == 2 and api.requests == [] and "prefix" in out.stderr


def test_dry_run_prints_the_patch_bodies_and_sends_nothing(tmp_path, api):
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "k8s", "label", str(PAIRWISE),
                          "--dry-run", "--taint"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:2] == [
        "PATCH /api/v1/nodes/node1 (application/merge-patch+json)",
        '{"metadata": {"labels": {"ncclcheck.io/pairwise": "ok"}}}']
    assert '"key": "ncclcheck.io/pairwise", "value": "slow"' in out.stdout
    assert api.requests == []


def test_plain_http_to_a_remote_server_is_refused(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "k8s", "label", str(PAIRWISE),
                          "--api-server", "http://198.18.0.1:8080"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "plain http only to a loopback" in out.stderr


def test_a_comma_in_a_value_is_refused_by_the_label_check_itself():
    """The schema refuses such a status first (above); the label check holds on its own."""
    from ncclcheck.errors import BadInput
    from ncclcheck.k8s.label import plan

    with pytest.raises(BadInput, match="a value is empty or at most 63"):
        plan({"schema": "ncclcheck/pairwise", "nodes": [{"host": "n1", "status": "a,b"}]})
    with pytest.raises(BadInput, match="not a valid host name"):
        plan({"schema": "ncclcheck/pairwise", "nodes": [{"host": "n1;x", "status": "ok"}]})
