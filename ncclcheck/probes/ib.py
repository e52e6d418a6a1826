"""ib: placeholder until the probe lands."""

from __future__ import annotations

from typing import Any

from ncclcheck.host import Host, Unavailable


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Not implemented yet."""
    raise Unavailable("ib probe not implemented yet")
