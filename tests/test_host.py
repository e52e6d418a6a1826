"""The rooted reader: live, recorded and recording hosts behave alike."""

from __future__ import annotations

import json
import os

import pytest

from ncclcheck.host import (LiveHost, QueryFailed, RecordedHost, RecordingHost, command_key,
                            filter_environ)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "sys/class/net/eth0").mkdir(parents=True)
    (root / "sys/class/net/eth0/mtu").write_text("9000\n")
    (root / "proc").mkdir()
    (root / "proc/garbage").write_bytes(b"\xff\xfe\x00bad")
    os.symlink("../../devices/pci0000:00/0000:00:03.0/net/eth0", root / "sys/class/net/eth1")
    return root


def test_live_reads_under_root_only(tree):
    host = LiveHost(str(tree))
    assert host.read("/sys/class/net/eth0/mtu") == "9000\n"
    assert host.read("sys/class/net/eth0/mtu") == "9000\n"
    assert host.read("../../etc/passwd") is None          # cannot leave the root
    assert host.read("sys/class/net/nope") is None
    assert host.listdir("sys/class/net") == ["eth0", "eth1"]
    assert host.listdir("missing") == []
    assert host.readlink("sys/class/net/eth1").endswith("net/eth0")
    assert host.readlink("sys/class/net/eth0") is None
    assert "\ufffd" in host.read("proc/garbage")           # undecodable bytes never raise
    assert "/sys/class/net/eth0/mtu" in host.sources


def test_live_reads_proc_sys_files():
    # /proc/sys refuses one large read; the reader reads in chunks.
    assert LiveHost().read("proc/sys/kernel/osrelease")


def test_run_never_raises():
    host = LiveHost()
    assert host.run(["true"]).ok
    missing = host.run(["ncclcheck-no-such-tool"])
    assert missing.returncode is None and "not found" in missing.why_failed()
    slow = host.run(["sleep", "5"], timeout=0.2)
    assert slow.timed_out and "timed out" in slow.why_failed()
    failing = host.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert failing.why_failed() == "sh: exit 3: oops"


def test_environ_is_allow_listed():
    env = {"NCCL_IB_HCA": "=mlx5_0", "TORCH_NCCL_BLOCKING_WAIT": "1", "AWS_SECRET_ACCESS_KEY": "x",
           "CUDA_VISIBLE_DEVICES": "0,1", "HOME": "/root", "NCCLX": "1"}
    assert filter_environ(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_HCA": "=mlx5_0",
                                   "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert LiveHost(env=env).environ() == filter_environ(env)


def test_recording_replays_identically(tree, tmp_path):
    live = RecordingHost(str(tree), env={"NCCL_DEBUG": "INFO", "SECRET_TOKEN": "s3cr3t"})
    seen = (live.read("sys/class/net/eth0/mtu"), live.listdir("sys/class/net"),
            live.readlink("sys/class/net/eth1"), live.exists("sys/class/net/eth0"),
            live.isdir("sys/class/net/eth0"), live.exists("nothing/here"),
            live.run(["echo", "hello"]).stdout, live.environ())
    with pytest.raises(QueryFailed):
        live.query("no-such-query")
    folder = live.save(tmp_path / "rec")
    replay = RecordedHost(folder)
    again = (replay.read("sys/class/net/eth0/mtu"), replay.listdir("sys/class/net"),
             replay.readlink("sys/class/net/eth1"), replay.exists("sys/class/net/eth0"),
             replay.isdir("sys/class/net/eth0"), replay.exists("nothing/here"),
             replay.run(["echo", "hello"]).stdout, replay.environ())
    assert again == seen
    assert "s3cr3t" not in "".join(p.read_text() for p in folder.rglob("*") if p.is_file())
    with pytest.raises(QueryFailed):
        replay.query("no-such-query")


def test_recorded_host_unknown_command_is_not_found(tmp_path):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / f"{command_key(['ldconfig', '-p'])}.txt").write_text("x\n")
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "nvml.json").write_text(json.dumps({"__error__": "no driver"}))
    host = RecordedHost(tmp_path)
    assert host.run(["ldconfig", "-p"]).stdout == "x\n"
    assert host.run(["nvidia-smi"]).returncode is None
    with pytest.raises(QueryFailed, match="no driver"):
        host.query("nvml")


def test_recorded_host_needs_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        RecordedHost(tmp_path / "absent")
