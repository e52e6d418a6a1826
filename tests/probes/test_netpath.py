"""netpath probe: routes, sysctls, firewall, /etc/hosts and identity, replayed through the
rooted reader from a recorded folder (the texts are those quoted in ncclcheck/probes/netpath.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probes import netpath
from ncclcheck.rules import NODE_RULES
from ncclcheck.rules.engine import evaluate

ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "eth0\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
         "eth9\t000012C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")


def write(base: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def recorded(tmp_path: Path, iptables: str | None, hosts: str, env: dict | None = None) -> Path:
    files = {"root/proc/net/route": ROUTE, "root/etc/hosts": hosts,
             "root/proc/sys/kernel/hostname": "gpu01\n",
             "root/proc/sys/kernel/random/boot_id": "2840fc75-b61e-4998-b875-ce3d768b0c29\n"}
    for name, rp in (("all", 1), ("default", 1), ("eth0", 0), ("eth9", 0)):
        for key, value in (("rp_filter", rp), ("arp_ignore", 0), ("arp_announce", 0)):
            files[f"root/proc/sys/net/ipv4/conf/{name}/{key}"] = f"{value}\n"
    if iptables is not None:
        files["commands/iptables_-S.txt"] = iptables
    write(tmp_path, files)
    (tmp_path / "links.json").write_text(json.dumps({"proc/self/ns/net": "net:[4026532281]"}))
    (tmp_path / "environ.json").write_text(json.dumps(env or {}))
    return tmp_path


def test_collect_reads_every_part(tmp_path):
    folder = recorded(tmp_path, "-P INPUT DROP\n-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\n",
                      "127.0.0.1\tlocalhost\n127.0.1.1\tgpu01\n", {"MASTER_ADDR": "localhost"})
    errors: list[str] = []
    data = netpath.collect(RecordedHost(folder), errors)
    assert errors == []
    assert [(r["interface"], r["destination"]) for r in data["routes"]] == [
        ("eth0", "198.18.0.0/24"), ("eth9", "198.18.0.0/24")]
    assert list(data["sysctl"])[:2] == ["all", "default"]
    assert data["sysctl"]["all"]["rp_filter"] == 1 and data["sysctl"]["eth9"]["rp_filter"] == 0
    assert data["firewall"]["input_policy"] == "DROP" and data["firewall"]["readable"] is True
    assert data["resolve"]["hostname_addrs"] == ["127.0.1.1"]
    assert data["resolve"]["master_addrs"] == ["127.0.0.1"]
    assert data["identity"] == {"boot_id": "2840fc75-b61e-4998-b875-ce3d768b0c29",
                                "netns": "net:[4026532281]"}


def test_unreadable_firewall_is_said_not_guessed(tmp_path):
    errors: list[str] = []
    data = netpath.collect(RecordedHost(recorded(tmp_path, None, "")), errors)
    assert data["firewall"]["readable"] is False and data["firewall"]["input_policy"] is None
    assert any("firewall ruleset not readable" in e for e in errors)


def test_recorded_facts_drive_the_rules(tmp_path):
    """MASTER_ADDR=localhost in a two-node job is an error; on one node (PyTorch's DDP tutorial
    sets it so) it is only INFO; the firewall rule needs the network section too."""
    folder = recorded(tmp_path, "-P INPUT DROP\n", "127.0.0.1 localhost\n",
                      {"MASTER_ADDR": "localhost"})
    data = netpath.collect(RecordedHost(folder), [])
    job = {"launcher": {"kind": "slurm", "nnodes": 2}}
    doc = {"hostname": "gpu01", "sections": {"netpath": {"status": "ok", "data": data},
                                             "host": {"status": "ok", "data": job}}}
    rules = [r for r in NODE_RULES if r.id == "host-hostname-loopback"]
    [finding] = evaluate(rules, [doc])["findings"]
    assert finding["severity"] == "error" and "MASTER_ADDR=localhost" in finding["message"]
    alone = {"hostname": "gpu01", "sections": {
        "netpath": {"status": "ok", "data": data},
        "env": {"status": "ok", "data": {"other": {"MASTER_ADDR": "localhost"}}}}}
    [finding] = evaluate(rules, [alone])["findings"]
    assert finding["severity"] == "info" and "one node" in finding["message"]


def test_native_nftables_drop_is_seen_behind_an_empty_iptables(tmp_path):
    """iptables-nft shows only its own tables: an `inet filter` table needs `nft list ruleset`."""
    folder = recorded(tmp_path, "-P INPUT ACCEPT\n", "")
    (folder / "commands" / "nft_list_ruleset.txt").write_text(
        "table inet filter {\n  chain input {\n"
        "    type filter hook input priority filter; policy drop;\n"
        "    tcp dport 22 accept\n  }\n}\n")
    data = netpath.collect(RecordedHost(folder), [])
    assert (data["firewall"]["tool"], data["firewall"]["input_policy"]) == ("nft", "DROP")
    assert data["firewall"]["input_rules"] == ["tcp dport 22 accept"]
