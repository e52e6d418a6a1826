"""`ncclcheck record`: a recording replays to the same facts, and a scrubbed one names nothing.

The leak test plants every kind of identifier the probe reads in a host tree (hostname, IPv4 and
IPv6 addresses in text and in the kernel's hex tables, MACs, IB GUIDs, RoCE GIDs, GPU and pod
UUIDs, container ids, a file server, other nodes' names in the launcher's variables, the user's
home) and records it with ``--root``. The live queries (addresses, Python paths) still describe
this machine, so its own hostname, addresses and MACs must be gone too.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.host.recording import RecordingHost
from ncclcheck.probe import collect_facts
from ncclcheck.record import Scrubber, record_host

HOSTNAME = "gpu-prod-17.corp.example.com"
IPV6 = "2600:1f18:4a3:6b00:9a1:5e2:c3d4:7b8f"
IPV6_HEX = "26001f1804a36b0009a105e2c3d47b8f"
PLANTED = {
    "hostname": "gpu-prod-17",
    "ipv4": "10.20.30.11",
    "gateway": "10.20.30.1",
    "gateway_hex": "011E140A",        # 10.20.30.1 as /proc/net/route writes it
    "subnet_hex": "001E140A",         # 10.20.30.0
    "ipv6_prefix_hex": "26001f1804a36b00",
    "ipv6_gid": "2600:1f18:04a3:6b00:09a1:05e2:c3d4:7b8f",
    "mac": "b8:3f:d2:0a:3b:6c",
    "node_guid": "b83f:d203:00a1:3b6c",
    "port_gid": "fe80:0000:0000:0000:b83f:d203:00a1:3b6c",
    "roce_gid": "0000:0000:0000:0000:0000:ffff:0a14:1e0b",  # ::ffff:10.20.30.11
    "pod": "3f1b7c9e_5a2d_4e8f_9b61_0c7d2e4a8f13",
    "container": "4f1c9a7b2d3e" + "a" * 52,
    "nfs": "homes-nfs01",
    "master": "gpu-prod-00",
    "nodelist": "gpu-prod-[00-17]",
    "hostid": "rack12-slot3",
}


def plant(root: Path) -> None:
    """A host tree holding every planted identifier where the probes read it."""
    files = {
        "proc/sys/kernel/hostname": HOSTNAME + "\n",
        "proc/net/route": ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU"
                           "\tWindow\tIRTT\n"
                           f"eth7\t00000000\t{PLANTED['gateway_hex']}\t0003\t0\t0\t0\t00000000\t0"
                           "\t0\t0\n"
                           f"eth7\t{PLANTED['subnet_hex']}\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0"
                           "\t0\t0\n"),
        "proc/net/ipv6_route": (f"{PLANTED['ipv6_prefix_hex']}{'0' * 16} 40 {'0' * 32} 00 "
                                f"{'0' * 32} 00000100 00000001 00000000 00000001     eth7\n"
                                f"{'0' * 32} 00 {'0' * 32} 00 {PLANTED['ipv6_prefix_hex']}"
                                f"{'0' * 15}1 00000400 00000003 00000000 00000003     eth7\n"),
        "proc/1/cgroup": (f"0::/kubepods.slice/kubepods-besteffort-pod{PLANTED['pod']}.slice/"
                          f"cri-containerd-{PLANTED['container']}.scope\n"),
        "proc/mounts": ("overlay / overlay rw,relatime 0 0\n"
                        f"{PLANTED['nfs']}:/export/home /home nfs4 rw,addr={PLANTED['gateway']},"
                        f"clientaddr={PLANTED['ipv4']} 0 0\n"
                        "shm /dev/shm tmpfs rw,size=65536k 0 0\n"),
        "sys/class/net/eth7/address": PLANTED["mac"] + "\n",
        "sys/class/net/eth7/type": "1\n",
        "sys/class/net/eth7/operstate": "up\n",
        "sys/class/infiniband/mlx5_0/node_guid": PLANTED["node_guid"] + "\n",
        "sys/class/infiniband/mlx5_0/ports/1/link_layer": "Ethernet\n",
        "sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        "sys/class/infiniband/mlx5_0/ports/1/gids/0": PLANTED["port_gid"] + "\n",
        "sys/class/infiniband/mlx5_0/ports/1/gids/1": PLANTED["roce_gid"] + "\n",
        "sys/class/infiniband/mlx5_0/ports/1/gids/2": PLANTED["ipv6_gid"] + "\n",
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/1": "RoCE v2\n",
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/2": "RoCE v2\n",
        "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/1": "eth7\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def this_machine() -> list[str]:
    """Identifiers of the machine running the test, as the live queries and sysfs give them."""
    import psutil

    found = [socket.gethostname()]
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            ip = ipaddress.ip_address(entry.address.split("%")[0])
            if not (ip.is_loopback or ip in ipaddress.ip_network("198.18.0.0/15")
                    or (ip.version == 6 and ip.is_link_local and ip.exploded.endswith(
                        "0000:0000:0000:0001"))):
                found.append(str(ip))
    for name in os.listdir("/sys/class/net"):
        try:
            mac = Path(f"/sys/class/net/{name}/address").read_text().strip().lower()
        except OSError:
            continue
        if mac and mac not in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"):
            found.append(mac)
    return [f for f in found if f and f not in ("localhost",)]


@pytest.fixture
def planted_env(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", PLANTED["master"])
    monkeypatch.setenv("SLURM_JOB_NODELIST", PLANTED["nodelist"])
    monkeypatch.setenv("NCCL_COMM_ID", f"{PLANTED['master']}:29400")
    monkeypatch.setenv("NCCL_HOSTID", PLANTED["hostid"])
    monkeypatch.setenv("SLURM_JOB_ID", "4242")


def leaked(values: dict[str, str], text: str) -> dict[str, str]:
    """The values found in ``text``; a short hostname only as a whole word."""
    return {k: v for k, v in values.items()
            if (v.lower() in text if len(v) > 6 else
                re.search(rf"(?<![\w-]){re.escape(v.lower())}(?![\w-])", text))}


def recorded_text(folder: Path) -> str:
    """Every file of a recording, file names included, lower-cased."""
    parts = []
    for path in sorted(folder.rglob("*")):
        parts.append(str(path.relative_to(folder)))
        if path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts).lower()


def test_scrubbed_recording_names_nothing_planted_nor_of_this_machine(tmp_path, planted_env):
    root = tmp_path / "root"
    plant(root)
    rec = record_host(str(tmp_path / "rec"), root=str(root), scrub=True)
    text = recorded_text(rec)
    wanted = {**PLANTED, **{f"machine:{v}": v for v in this_machine()},
              "ipv6": IPV6, "ipv6_exploded": ipaddress.IPv6Address(IPV6).exploded,
              "ipv6_iid": "9a1:5e2:c3d4:7b8f"}
    assert leaked(wanted, text) == {}
    assert "homes-nfs01" not in text and "fileserver-1:/export/home" in text


def test_scrubbed_recording_keeps_relations_and_replays(tmp_path, planted_env):
    root = tmp_path / "root"
    plant(root)
    rec = record_host(str(tmp_path / "rec"), root=str(root), scrub=True)
    facts = json.loads((rec / "facts.json").read_text())
    assert facts["hostname"] == "host-1"
    network = facts["sections"]["network"]["data"]
    [v4_route] = [r for r in network["default_routes"] if r["family"] == "inet"]
    [v6_route] = [r for r in network["default_routes"] if r["family"] == "inet6"]
    [port] = facts["sections"]["ib"]["data"]["devices"][0]["ports"]
    by_index = {g["index"]: g for g in port["gids"]}
    # the RoCE GID's IPv4 stays in the gateway's /24; the IPv6 GID stays in the route's /64
    gateway = ipaddress.ip_address(v4_route["gateway"])
    assert ipaddress.ip_address(by_index[1]["ipv4"]) in ipaddress.ip_network(f"{gateway}/24",
                                                                               strict=False)
    v6_net = ipaddress.ip_network(f"{v6_route['gateway']}/64", strict=False)
    assert ipaddress.ip_address(by_index[2]["gid"]) in v6_net
    assert v6_net.subnet_of(ipaddress.ip_network("2001:db8::/32"))
    # the port GID's interface id is the node GUID: both map to the same scrubbed GUID
    device = facts["sections"]["ib"]["data"]["devices"][0]
    assert by_index[0]["gid"].endswith(device["node_guid"])
    env = facts["sections"]["env"]["data"]
    master = env["other"]["MASTER_ADDR"]
    assert master.startswith("host-") and master != facts["hostname"]
    assert env["nccl"]["NCCL_COMM_ID"] == f"{master}:29400"
    assert env["other"]["SLURM_JOB_NODELIST"].endswith("[00-17]")
    # the recording replays to what facts.json says
    again = collect_facts(RecordedHost(rec))
    assert {n: s["data"] for n, s in again["sections"].items()} == {
        n: s["data"] for n, s in facts["sections"].items()}


def test_unscrubbed_recording_replays_to_the_live_facts(tmp_path, planted_env):
    root = tmp_path / "root"
    plant(root)
    live = RecordingHost(str(root))
    first = collect_facts(live)
    live.save(tmp_path / "rec")
    again = collect_facts(RecordedHost(tmp_path / "rec"))
    for name, section in first["sections"].items():
        assert (again["sections"][name]["status"], again["sections"][name]["errors"],
                again["sections"][name]["data"]) == (
            section["status"], section["errors"], section["data"]), name
    assert again["findings"] == first["findings"]
    # every planted identifier is read, so the scrubbed test above proves something
    assert leaked(PLANTED, recorded_text(tmp_path / "rec")) == PLANTED


def test_scrubber_maps_each_form_of_one_address_alike():
    s = Scrubber()
    compressed = s(IPV6)
    assert s(PLANTED["ipv6_gid"]) == ipaddress.IPv6Address(compressed).exploded
    hexed = s.file("proc/net/if_inet6", f"{IPV6_HEX} 07 40 00 80     eth7\n")
    assert hexed.split()[0] == f"{int(ipaddress.IPv6Address(compressed)):032x}"
    route = s.file("proc/net/route", "Iface\tDestination\tGateway\n"
                                     f"eth7\t00000000\t{PLANTED['gateway_hex']}\t0003\n")
    gateway = int(route.split()[-2], 16).to_bytes(4, "little")
    assert ipaddress.IPv4Address(gateway) == ipaddress.IPv4Address(s("10.20.30.1"))
    assert s("::ffff:10.20.30.11") == "::ffff:" + s("10.20.30.11")
    # multicast, loopback and documentation addresses stay; a link-local one stays link-local
    assert s("ff02::1 ::1 2001:db8::5") == "ff02::1 ::1 2001:db8::5"
    assert ipaddress.IPv6Address(s("fe80::fc:ff:fe00:1")).is_link_local
    assert s("undefined symbol: std::string, ibv_reg_mr::x") == \
        "undefined symbol: std::string, ibv_reg_mr::x"  # not addresses


@pytest.mark.parametrize("make, args, code, needle", [
    (lambda t: (t / "file").write_text("x"), ["{t}/file"], 2, "not a directory"),
    (lambda t: (t / "full").mkdir() or (t / "full" / "x").write_text("x"), ["{t}/full"], 2,
     "not empty"),
    (lambda t: None, ["{t}/new", "--root", "{t}/no-such-root"], 2, "--root"),
    (lambda t: (t / "file").write_text("x"), ["{t}/file/sub"], 2, "cannot write"),
])
def test_record_refuses_bad_targets_in_one_line(tmp_path, make, args, code, needle):
    make(tmp_path)
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "record",
                          *(a.format(t=tmp_path) for a in args)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == code, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_record_host_raises_typed_errors(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput):
        record_host(str(tmp_path / "f"))
    with pytest.raises(NcclcheckError, match="cannot write"):
        record_host(str(tmp_path / "f" / "sub"), root=str(tmp_path))


def test_scrubber_hides_the_user_name_of_a_home_directory():
    s = Scrubber()
    s.add_home("/home/alice")
    assert s("/home/alice/.nccl.conf home/alice/venv /home/alicex /srv/alice") == \
        "/home/user/.nccl.conf home/user/venv /home/alicex /srv/alice"
    s.add_home("/root")
    assert s.user == "alice"


def test_no_recorded_host_keeps_a_serial_number():
    """scripts/device-check found `record` keeping an H200's serial in nvidia-smi -q's text."""
    import re
    from pathlib import Path

    from ncclcheck.record import Scrubber

    hosts = Path(__file__).parent / "fixtures" / "hosts"
    leaks = [str(p) for p in hosts.rglob("*") if p.is_file() and p.suffix in (".txt", ".xml")
             and re.search(r"Serial Number\s*:\s*\d{6,}|<serial>\d{6,}<", p.read_text("latin-1"))]
    assert leaks == []
    real = "    Serial Number                                      : 1653425085064\n"
    assert "1653425085064" not in Scrubber()(real)
