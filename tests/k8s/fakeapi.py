"""A loopback HTTP(S) server that answers as the Kubernetes API server does for nodes
(``/api/v1/nodes/{name}``: GET returns the Node, PATCH with application/merge-patch+json
merges; a ``metadata.resourceVersion`` in the patch that is not the current one is 409
Conflict; 403/404 are ``Status`` objects). It records every request. With ``cert``/``key`` it
serves TLS, as the in-cluster API server a pod reaches at ``KUBERNETES_SERVICE_HOST`` does."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class FakeAPI:
    """Nodes by name; ``conflicts[name]`` 409s to answer before a taint patch succeeds;
    ``forbidden`` answers 403 to everything."""

    def __init__(self, names, host: str = "127.0.0.1", cert: str | None = None,
                 key: str | None = None):
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

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if cert else 'http'}://{host}:{self.port}"
        if cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def self_signed(directory: Path, address: str) -> tuple[str, str]:
    """(cert, key) of a self-signed CA certificate for ``address`` (an IP SAN), as a cluster's
    ``ca.crt`` signs its API server's."""
    cert, key = directory / "ca.crt", directory / "ca.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=kubernetes", "-addext", f"subjectAltName=IP:{address}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    return str(cert), str(key)
