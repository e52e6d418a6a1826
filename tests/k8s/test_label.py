"""``ncclcheck k8s label`` against a loopback HTTP server that answers as the API server does
(``/api/v1/nodes/{name}``: GET returns the Node, PATCH with application/merge-patch+json
merges; a ``metadata.resourceVersion`` in the patch that is not the current one is 409
Conflict; 403/404 are ``Status`` objects). The server records every request."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PAIRWISE = Path(__file__).resolve().parent.parent / "fixtures" / "reports" / "netns-hunt" / \
    "pairwise.json"
TOKEN = "test-token-123"


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class FakeAPI:
    """Nodes by name; ``conflicts[name]`` 409s to answer before a taint patch succeeds;
    ``forbidden`` answers 403 to everything."""

    def __init__(self, names):
        self.nodes = {n: {"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": n, "resourceVersion": "100", "labels": {}},
                          "spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}}
                      for n in names}
        self.requests: list[tuple] = []
        self.conflicts: dict[str, int] = {}
        self.forbidden = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                api.requests.append((self.command, self.path, self.headers.get("Content-Type"),
                                     self.headers.get("Authorization"), body))
                name = self.path.rsplit("/", 1)[-1]
                if api.forbidden:
                    return self.answer(403, status(403, "Forbidden", f'nodes "{name}" is '
                                                  'forbidden: User "system:serviceaccount:'
                                                  'default:x" cannot patch resource "nodes"'))
                if name not in api.nodes or not self.path.startswith("/api/v1/nodes/"):
                    return self.answer(404, status(404, "NotFound", f'nodes "{name}" not found'))
                node = api.nodes[name]
                if self.command == "GET":
                    return self.answer(200, node)
                rv = (body.get("metadata") or {}).get("resourceVersion")
                if rv is not None and (api.conflicts.get(name) or rv != node["metadata"][
                        "resourceVersion"]):
                    api.conflicts[name] = max(0, api.conflicts.get(name, 0) - 1)
                    node["metadata"]["resourceVersion"] = str(
                        int(node["metadata"]["resourceVersion"]) + 1)  # someone else wrote
                    return self.answer(409, status(409, "Conflict", "the object has been "
                                                   "modified; please apply your changes to the "
                                                   "latest version and try again"))
                node["metadata"]["labels"].update((body.get("metadata") or {}).get("labels", {}))
                if "spec" in body:
                    node["spec"].update(body["spec"])
                node["metadata"]["resourceVersion"] = str(
                    int(node["metadata"]["resourceVersion"]) + 1)
                return self.answer(200, node)

            do_GET = do_PATCH = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


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
