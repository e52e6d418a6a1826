"""The command line: exit codes, one-line errors, no tracebacks, atomic -o."""

from __future__ import annotations

import json
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
                "etc/nccl.conf", "etc/ld.so.conf", "proc/sys/kernel/hostname"):
        path = rec / "root" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
    (rec / "queries").mkdir()
    for name in ("nvml", "lib_versions", "python_paths", "verbs", "net_addrs"):
        (rec / "queries" / f"{name}.json").write_text(json.dumps([1, "x", None]))
    (rec / "commands").mkdir()
    for key in ("ldconfig_-p", "nvidia-smi_topo_-m", "ip_-j_addr"):
        (rec / "commands" / f"{key}.txt").write_bytes(b"\x00garbage\xff" * 20)
    out = ncclcheck("probe", "--replay", str(rec), "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert set(doc["sections"]) == {"host", "gpu", "nccl", "network", "ib", "limits", "env"}
    tables = ncclcheck("probe", "--replay", str(rec))
    assert tables.returncode == 0 and "Traceback" not in tables.stderr


def test_every_recorded_host_renders():
    for host in sorted(p for p in HOSTS.iterdir() if p.is_dir()):
        out = ncclcheck("probe", "--replay", str(host))
        assert out.returncode == 0, (host.name, out.stderr)
        assert "Traceback" not in out.stderr
