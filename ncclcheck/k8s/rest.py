"""A minimal Kubernetes API client over the standard library (``urllib``): GET and PATCH of
nodes, with a deadline on every request, and every failure as one line.

Configuration, first found: ``--api-server``/``--token-file``/``--ca-file``; else the in-cluster
config a pod gets (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the service account's ``token``
and ``ca.crt`` under ``/var/run/secrets/kubernetes.io/serviceaccount``). Plain ``http://`` is
taken only for a loopback server (``kubectl proxy``, tests): a token never crosses a network
unencrypted.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ncclcheck.errors import BadInput, NcclcheckError

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MERGE_PATCH = "application/merge-patch+json"
MAX_BODY = 8 << 20


class Conflict(Exception):
    """409: the object changed since it was read (resourceVersion)."""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Client:
    """Where the API server is and how to sign in."""

    server: str
    token: str | None = None
    ca_file: str | None = None
    timeout: float = 10.0

    @classmethod
    def configure(cls, environ: dict[str, str], api_server: str | None, token_file: str | None,
                  ca_file: str | None, timeout: float = 10.0) -> "Client":
        """From the options, else the in-cluster config; :class:`BadInput` when neither."""
        if not api_server:
            host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get(
                "KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise BadInput("no API server: pass --api-server (with --token-file, --ca-file) "
                               "or run in a pod (KUBERNETES_SERVICE_HOST)")
            api_server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
            token_file = token_file or f"{SA_DIR}/token"
            ca_file = ca_file or f"{SA_DIR}/ca.crt"
        url = urllib.parse.urlsplit(api_server)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise BadInput(f"--api-server {api_server!r}: expected https://HOST[:PORT]")
        if url.scheme == "http" and not _loopback(url.hostname):
            raise BadInput(f"--api-server {api_server!r}: plain http only to a loopback address "
                           "(kubectl proxy); use https")
        return cls(api_server.rstrip("/"), read_token(token_file) if token_file else None,
                   ca_file, timeout)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> dict[str, Any]:
        """Send one request; the JSON answer. :class:`Conflict` on 409, else one-line
        :class:`NcclcheckError` (exit 1) for any HTTP or connection failure."""
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        context = None
        if self.server.startswith("https://"):
            context = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=context) as resp:
                text = resp.read(MAX_BODY)
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                raise Conflict(path) from None
            raise NcclcheckError(f"{method} {path}: HTTP {exc.code} {_reason(exc)}") from None
        except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
            why = getattr(exc, "reason", exc)
            raise NcclcheckError(f"{method} {self.server}{path}: {why}") from None
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise NcclcheckError(f"{method} {path}: the answer is not JSON") from None


def read_token(path: str) -> str:
    """The bearer token in ``path`` (at most 64 KiB); :class:`BadInput` when unreadable."""
    try:
        with open(path, "rb") as f:
            token = f.read(65536).decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--token-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token or any(c.isspace() for c in token):
        raise BadInput(f"--token-file {path}: not a bearer token (empty or with spaces)")
    return token


def _reason(exc: urllib.error.HTTPError) -> str:
    """The API's Status message (``{"kind":"Status","message":...}``), else the HTTP reason."""
    try:
        status = json.loads(exc.read(65536) or b"{}")
        message = status.get("message") if isinstance(status, dict) else None
    except (ValueError, OSError):
        message = None
    return " ".join(str(message or exc.reason or "").split())[:300]
