"""The command line: exit codes, one-line errors, no tracebacks, atomic -o."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.exitcodes import ExitCode

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def ncclcheck(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120, **kw)


def test_version_and_help():
    from ncclcheck import __version__

    assert ncclcheck("--version").stdout.strip().endswith(__version__)
    out = ncclcheck("--help")
    assert out.returncode == 0 and "probe" in out.stdout and "Exit codes" in out.stdout


def test_exit_codes_are_distinct():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3]


@pytest.mark.parametrize("args, needle", [
    (["probe", "--only", "nope"], "unknown section nope"),
    (["probe", "--root", "/no/such/dir"], "not a directory"),
    (["probe", "--replay", "/no/such/dir"], "no recording folder"),
    (["probe", "-o", "/no/such/dir/facts.json"], "cannot write"),
    (["probe", "-o", "/"], "is a directory"),
    (["probe", "--replay", "/dev/null"], "no recording folder"),
    (["probe", "--fail-on", "catastrophic"], "Invalid value"),
    (["no-such-command"], "No such command"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    out = ncclcheck(*args)
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_probe_writes_atomically_and_quietly(tmp_path):
    target = tmp_path / "facts.json"
    out = ncclcheck("probe", "-o", str(target))
    assert out.returncode == 0 and out.stdout == ""
    assert json.loads(target.read_text())["schema"] == "ncclcheck/facts"
    assert "facts written to" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["facts.json"]


def test_fail_on_gives_exit_3_only_when_a_finding_is_severe_enough(tmp_path):
    # A container with a 64 MiB /dev/shm: limits-shm-too-small fires as an error.
    rec = tmp_path / "host"
    (rec / "root/proc").mkdir(parents=True)
    (rec / "root/proc/mounts").write_text("shm /dev/shm tmpfs rw,size=65536k 0 0\n")
    (rec / "root/.dockerenv").write_text("")
    (rec / "queries").mkdir()
    (rec / "queries" / "statvfs__dev_shm.json").write_text(
        json.dumps({"total_bytes": 64 << 20, "free_bytes": 60 << 20}))
    out = ncclcheck("probe", "--replay", str(rec), "--json", "--fail-on", "error")
    assert out.returncode == 3
    limits = json.loads(out.stdout)["sections"]["limits"]
    assert limits["data"]["shm"]["free_bytes"] == 60 << 20
    assert not any("statvfs" in e for e in limits["errors"])
    quiet = ncclcheck("probe", "--replay", str(rec), "--only", "host", "--fail-on", "info")
    assert quiet.returncode == 0


def test_garbage_recorded_host_never_tracebacks(tmp_path):
    """Every file the probe may read holds garbage: sections may fail, the command must not."""
    import random

    rng = random.Random(7)
    rec = tmp_path / "garbage"
    for rel in ("proc/mounts", "proc/self/limits", "proc/cpuinfo", "proc/meminfo", "etc/os-release",
                "proc/net/route", "proc/net/ipv6_route", "proc/1/cgroup",
                "sys/class/net/eth0/mtu", "sys/class/net/eth0/speed", "sys/class/net/eth0/type",
                "sys/class/net/eth0/operstate", "sys/class/infiniband/mlx5_0/ports/1/state",
                "sys/class/infiniband/mlx5_0/ports/1/rate",
                "sys/class/infiniband/mlx5_0/ports/1/gids/0",
                "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/0",
                "etc/nccl.conf", "etc/ld.so.conf", "proc/sys/kernel/hostname",
                "usr/local/cuda/version.json", "usr/local/cuda/version.txt"):
        path = rec / "root" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
    (rec / "queries").mkdir()
    for name in ("nvml", "lib_versions", "python_paths", "verbs", "net_addrs", "statvfs"):
        (rec / "queries" / f"{name}.json").write_text(json.dumps([1, "x", None]))
    (rec / "commands").mkdir()
    for key in ("ldconfig_-p", "nvidia-smi_topo_-m", "ip_-d_-j_addr_show"):  # the probes' keys
        (rec / "commands" / f"{key}.txt").write_bytes(b"\x00garbage\xff" * 20)
    out = ncclcheck("probe", "--replay", str(rec), "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert set(doc["sections"]) == {"host", "gpu", "cuda", "nccl", "network", "ib", "limits",
                                    "env", "netpath", "platform"}
    # garbage is unknown data, said so in errors; no probe trips over it
    status = {n: s["status"] for n, s in doc["sections"].items()}
    assert "error" not in status.values(), {n: s["errors"] for n, s in doc["sections"].items()}
    assert status["gpu"] == "unavailable"          # a garbage NVML answer is not "0 GPUs"
    assert any("python_paths" in e for e in doc["sections"]["nccl"]["errors"])
    assert doc["sections"]["limits"]["data"]["memlock"]["unlimited"] is None
    tables = ncclcheck("probe", "--replay", str(rec))
    assert tables.returncode == 0 and "Traceback" not in tables.stderr


def test_every_recorded_host_renders():
    for host in sorted(p for p in HOSTS.iterdir() if p.is_dir()):
        out = ncclcheck("probe", "--replay", str(host))
        assert out.returncode == 0, (host.name, out.stderr)
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize("columns", [80, 60])
@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if p.is_dir()))
def test_tables_in_a_narrow_terminal_lose_no_value(host, columns):
    """`probe | less` and small terminals: every value is printed whole, nothing is cropped."""
    import os

    out = ncclcheck("probe", "--replay", str(HOSTS / host),
                    env={**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    long = [line for line in text.splitlines()
            if len(line) > columns and not line.startswith("see   https://")]
    assert long == []
    facts = json.loads(ncclcheck("probe", "--replay", str(HOSTS / host), "--json").stdout)
    words = set(text.replace("│", " ").split())
    network = facts["sections"]["network"]["data"]
    for iface in network["interfaces"]:
        assert str(iface["mtu"]) in words, (iface["name"], iface["mtu"])
        for addr in iface["ipv4"]:
            assert f"{addr['address']}/{addr['prefix']}" in words
        if iface["pci_address"]:
            assert iface["pci_address"] in words
    gpu = facts["sections"]["gpu"]
    for g in (gpu["data"] or {}).get("gpus", []) if gpu["status"] == "ok" else []:
        assert g["pci_bus_id"] in words
    ib = facts["sections"]["ib"]
    for dev in (ib["data"] or {}).get("devices", []) if ib["status"] == "ok" else []:
        assert dev["pci_address"] in words
        for port in dev["ports"]:
            assert port["state"] in words
    for finding in facts["findings"]:
        assert f"see   {finding['docs']}" in text


def test_output_dash_is_the_json_on_stdout_alone():
    out = ncclcheck("probe", "--replay", str(HOSTS / "cloud-vm-1nic"), "-o", "-")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["hostname"] == "cloud-vm-01"  # nothing but the document


def test_the_tables_survive_any_section_data():
    """Each view meets odd data (a probe bug, an old facts file) and falls back, never raises."""
    import io
    import random

    from rich.console import Console

    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.probe import collect_facts
    from ncclcheck.render.facts import render_facts

    docs = [collect_facts(RecordedHost(HOSTS / h)) for h in ("h100-ib-8gpu", "a100-roce-bond")]
    odd = [None, 1, "x", [], {}, [1, None], {"a": 1}, -1, 1e30, True]
    for seed in range(24):
        rng = random.Random(seed)
        doc = json.loads(json.dumps(rng.choice(docs)))

        def mutate(node):
            items = node.items() if isinstance(node, dict) else enumerate(node) \
                if isinstance(node, list) else ()
            for key, value in list(items):
                if rng.random() < 0.05:
                    node[key] = rng.choice(odd)
                else:
                    mutate(value)

        for section in doc["sections"].values():
            mutate(section["data"])
        mutate(doc["findings"])
        width = 50 if seed % 4 == 0 else 80
        render_facts(Console(file=io.StringIO(), width=width, color_system=None), doc)


def test_group_help_at_80_columns_keeps_each_commands_sentence_whole():
    """Issue 27 item 11: click cut the one-liners with '...' at 80 columns."""
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ncclcheck", "--help"], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert out.returncode == 0 and "..." not in out.stdout.split("Commands:")[1], out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    flat = " ".join(out.stdout.split())
    assert "recommend Recommend NCCL settings for every node: stdout is an env file, reasons go " \
           "to stderr." in flat
    assert "bench Measure collective bandwidth like nccl-tests, over torch.distributed (NCCL " \
           "or gloo)." in flat


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if p.is_dir()))
def test_netpath_and_platform_panels_are_prose_at_80_columns(host):
    """Issue 27 item 11: no dump of the facts' keys (readable=, boot_id=, platform.iommu, a
    table of rp_filter zeros); NUMA nodes as a count."""
    import os

    out = ncclcheck("probe", "--replay", str(HOSTS / host),
                    env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr
    for dump in ("readable=", "input_policy=", "boot_id=", "netns=", "platform.", "netpath.",
                 "acs_readable", "fabric_manager", "hostname_addrs", "┃"):
        assert dump not in out.stdout, (dump, out.stdout)
    panel = out.stdout.split("netpath ")[1]
    assert "firewall  " in panel and "IPv4 routes" in panel
    facts = json.loads(ncclcheck("probe", "--replay", str(HOSTS / host), "--json").stdout)
    numa = facts["sections"]["host"]["data"]["numa_nodes"]
    assert re.search(rf"NUMA nodes\s+{len(numa)}\b", out.stdout), out.stdout


def test_sysctl_table_only_where_a_value_is_not_the_default():
    import io

    from rich.console import Console

    from ncclcheck.render.sections_net import netpath_view

    def shown(sysctl):
        console = Console(file=io.StringIO(), width=80, color_system=None)
        for part in netpath_view({"firewall": {"readable": True, "tool": "nft",
                                               "input_policy": "ACCEPT", "input_rules": []},
                                  "routes": [], "sysctl": sysctl}):
            console.print(part)
        return console.file.getvalue()

    zeros = {n: {"rp_filter": 0, "arp_ignore": 0, "arp_announce": 0} for n in ("all", "eth0")}
    assert "the kernel's default (0) on every interface" in " ".join(shown(zeros).split())
    odd = shown({**zeros, "eth1": {"rp_filter": 1, "arp_ignore": 0, "arp_announce": 2}})
    assert "not at the kernel's default" in odd and re.search(r"eth1\s+1\s+0\s+2", odd)
    assert "eth0" not in odd and "nft: INPUT policy ACCEPT, no rules" in odd


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS.iterdir() if p.is_dir()))
def test_names_and_paths_are_never_split_inside_at_80_columns(host):
    """Issue 27 item 11: 'enp27s0f' / '0np0', 'site-package' / 's/nvidia' no more: a name is
    whole, a path wraps only after a '/'."""
    import os

    out = ncclcheck("probe", "--replay", str(HOSTS / host),
                    env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"})
    words = out.stdout.replace("│", " ").split()
    facts = json.loads(ncclcheck("probe", "--replay", str(HOSTS / host), "--json").stdout)
    for iface in facts["sections"]["network"]["data"]["interfaces"]:
        assert iface["name"] in words, iface["name"]
    ib = facts["sections"]["ib"]
    for dev in (ib["data"] or {}).get("devices", []) if ib["status"] == "ok" else []:
        for port in dev["ports"]:
            assert f"{dev['name']}:{port['port']}" in words
    for lib in facts["sections"]["nccl"]["data"]["libraries"]:
        for segment in filter(None, lib["path"].split("/")):
            assert any(segment in w for w in words), (segment, out.stdout)
