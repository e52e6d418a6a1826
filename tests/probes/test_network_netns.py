"""network probe inside a real network namespace: bridge, docker-named bridge, veth pair, dummy.

The namespace lives only for the test; addresses are in 198.18.0.0/15 and no packet is sent.
``ncclcheck probe`` runs inside it through ``ip netns exec``, which also remounts /sys so that
/sys/class/net shows the namespace's interfaces: the same reads as on a real node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import needs_netns

pytestmark = [pytest.mark.netns, needs_netns]

REPO = Path(__file__).resolve().parents[2]


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


@pytest.fixture
def netns():
    """A namespace with nbr0 (bridge), docker0 (bridge), nve0<->nve1 (veth), ndm0 (dummy).

    Kernels without the dummy driver (CONFIG_DUMMY unset) get an ifb device instead: another
    software-only interface the probe must call ``virtual``.
    """
    name = f"ncclck-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", name)
    try:
        def run(*args: str) -> None:
            ip("-n", name, *args)

        run("link", "set", "lo", "up")
        run("link", "add", "nbr0", "type", "bridge")
        run("link", "add", "docker0", "type", "bridge")
        run("link", "add", "nve0", "type", "veth", "peer", "name", "nve1")
        run("link", "set", "nve0", "master", "nbr0")
        dummy_kind = "dummy"
        if ip("-n", name, "link", "add", "ndm0", "type", "dummy", check=False).returncode != 0:
            dummy_kind = "ifb"
            run("link", "add", "ndm0", "type", "ifb")
        run("addr", "add", "198.18.10.1/24", "dev", "nbr0")
        run("addr", "add", "198.18.11.1/24", "dev", "nve1")
        run("addr", "add", "198.18.12.1/24", "dev", "docker0")
        run("addr", "add", "198.19.10.1/24", "dev", "ndm0")
        for dev in ("nbr0", "docker0", "nve0", "nve1", "ndm0"):
            run("link", "set", dev, "up")
        run("route", "add", "default", "via", "198.18.10.254", "dev", "nbr0")
        yield name, dummy_kind
    finally:
        ip("netns", "del", name, check=False)


def probe_in(ns: str, path: str | None = None) -> dict:
    """Run ``ncclcheck probe --json --only network`` inside ``ns``; the network section's data."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if path is not None:
        env["PATH"] = path
    ip_path = shutil.which("ip") or "ip"  # resolved here: the child's PATH may hide it
    proc = subprocess.run([ip_path, "netns", "exec", ns, sys.executable, "-m", "ncclcheck", "probe",
                           "--json", "--only", "network"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert proc.returncode in (0, 3), proc.stderr
    section = json.loads(proc.stdout)["sections"]["network"]
    assert section["status"] == "ok", section["errors"]
    return section["data"]


def check_namespace(data: dict, dummy_kind: str | None) -> None:
    ifs = {i["name"]: i for i in data["interfaces"]}
    assert set(ifs) == {"lo", "nbr0", "docker0", "nve0", "nve1", "ndm0"}
    kinds = {n: i["kind"] for n, i in ifs.items()}
    assert kinds == {"lo": "loopback", "nbr0": "bridge", "docker0": "docker", "nve0": "veth",
                     "nve1": "veth", "ndm0": "virtual"}
    if dummy_kind:
        assert ifs["ndm0"]["link_kind"] == dummy_kind
        assert ifs["nve0"]["link_kind"] == "veth" and ifs["nbr0"]["link_kind"] == "bridge"
    assert ifs["nve0"]["master"] == "nbr0" and ifs["nve1"]["master"] is None
    expected = {"nbr0": ("198.18.10.1", "198.18.10.0/24"), "nve1": ("198.18.11.1", "198.18.11.0/24"),
                "docker0": ("198.18.12.1", "198.18.12.0/24"), "ndm0": ("198.19.10.1", "198.19.10.0/24")}
    for name, (address, subnet) in expected.items():
        assert ifs[name]["ipv4"] == [{"address": address, "prefix": 24, "subnet": subnet}], name
    assert ifs["nve0"]["ipv4"] == []
    assert all(i["pci_address"] is None and i["numa_node"] is None for i in ifs.values())
    assert (ifs["nve1"]["operstate"], ifs["nve1"]["carrier"]) == ("up", True)
    assert data["default_route_interfaces"] == ["nbr0"]
    assert data["default_routes"][0]["gateway"] == "198.18.10.254"
    assert ifs["nbr0"]["default_route"] and not ifs["ndm0"]["default_route"]


def test_probe_inside_namespace_with_ip(netns):
    ns, dummy_kind = netns
    check_namespace(probe_in(ns), dummy_kind)


def test_probe_inside_namespace_from_sysfs_alone(netns):
    """Without `ip` on PATH the kinds come from sysfs only, and addresses from psutil."""
    ns, _ = netns
    data = probe_in(ns, path="/nonexistent")
    check_namespace(data, None)
    assert all(i["link_kind"] is None for i in data["interfaces"])
