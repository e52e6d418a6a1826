"""The rooted reader: live, recorded and recording hosts behave alike."""

from __future__ import annotations

import json
import os

import pytest

from ncclcheck.errors import QueryFailed
from ncclcheck.host.envfilter import filter_environ
from ncclcheck.host.keys import command_key
from ncclcheck.host.live import LiveHost
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.host.recording import RecordingHost
from ncclcheck.rootpaths import MAX_READ_BYTES


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


def test_only_regular_files_are_read_and_a_fifo_never_blocks(tmp_path):
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    os.mkfifo(root / "proc/mounts")                      # a reader of a FIFO waits for a writer
    (root / "proc/cpuinfo").mkdir()                      # a directory where a file is expected
    (root / "proc/big").write_bytes(b"x" * (MAX_READ_BYTES + 12345))
    host = LiveHost(str(root))
    assert host.read("proc/mounts") is None
    assert host.read("proc/cpuinfo") is None
    assert len(host.read("proc/big")) == MAX_READ_BYTES
    assert host.read("dev/null") is None and LiveHost().read("dev/zero") is None  # devices


def test_a_probe_over_a_tree_full_of_traps_finishes(tmp_path):
    """FIFOs, directories and links where the probes expect files: every section still ends."""
    import subprocess
    import sys

    rec = tmp_path / "rec"
    root = rec / "root"
    for rel in ("proc/mounts", "proc/self/limits", "proc/net/route", "etc/nccl.conf",
                "sys/class/net/eth0/mtu", "sys/class/infiniband/mlx5_0/ports/1/state"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(root / rel)
    (root / "proc/cpuinfo").mkdir(parents=True)
    (root / "etc/os-release").symlink_to("/etc/hostname")   # absolute: stays inside the root
    (rec / "environ.json").write_text("{}")
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--replay", str(rec),
                          "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["sections"]["host"]["data"]["os"] is None


def test_links_under_a_mounted_root_stay_inside_it(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/os-release").write_text('PRETTY_NAME="Inside"\n')
    (root / "etc/os-release").symlink_to("/usr/lib/os-release")      # absolute, as distros do
    (root / "etc/passwd-link").symlink_to("../../../../../etc/passwd")  # climbs above the root
    (root / "etc/loop").symlink_to("loop")
    host = LiveHost(str(root))
    assert host.read("etc/os-release") == 'PRETTY_NAME="Inside"\n'
    assert host.read("etc/passwd-link") is None          # resolves to <root>/etc/passwd
    assert host.read("etc/loop") is None
    assert host.readlink("etc/os-release") == "/usr/lib/os-release"
    assert host.exists("etc/os-release") and not host.exists("etc/passwd-link")


@pytest.mark.parametrize("name, text, needle", [
    ("links.json", "{garbage", "not valid JSON"),
    ("listings.json", '{"sys/class/net": "eth0"}', "expected an object of list values"),
    ("paths.json", "[1, 2]", "expected an object"),
    ("environ.json", '{"A": [1]}', "expected an object"),
])
def test_a_broken_recording_is_bad_input(tmp_path, name, text, needle):
    from ncclcheck.errors import BadInput

    (tmp_path / name).write_text(text)
    with pytest.raises(BadInput, match=needle):
        RecordedHost(tmp_path)


def test_broken_recorded_answers_fail_softly(tmp_path):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "ldconfig_-p.json").write_text("{nope")
    (tmp_path / "commands" / "ip_-j.txt").mkdir()              # a directory, not an output
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "nvml.json").write_text("not json")
    host = RecordedHost(tmp_path)
    broken = host.run(["ldconfig", "-p"])
    assert broken.returncode is None and "not valid JSON" in broken.stderr
    assert host.run(["ip", "-j"]).why_failed() == "ip: not found"
    with pytest.raises(QueryFailed, match="recorded answer unusable"):
        host.query("nvml")
    assert host.read("../../etc/passwd") is None and host.listdir("../x") == []


def test_native_queries_do_not_import_the_host():
    """native/ stands below host/: loading it (and failing a query) needs no host module."""
    import subprocess
    import sys

    code = ("import sys\nfrom ncclcheck import native\n"
            "try:\n    native.call(None, 'no-such-query')\nexcept Exception as exc:\n"
            "    print(type(exc).__module__, type(exc).__name__)\n"
            "print('HOST:' + ','.join(m for m in sys.modules if m.startswith('ncclcheck.host')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["ncclcheck.errors QueryFailed", "HOST:"], out.stderr[-500:]


def test_query_failed_is_one_type_everywhere(tmp_path):
    """One type, one import path: the error lives in errors.py, and ncclcheck.host (once a door
    re-exporting it) no longer hands out a second name for it (issue 29)."""
    from ncclcheck import errors, host
    from ncclcheck.host import protocol

    assert QueryFailed is errors.QueryFailed
    assert not hasattr(host, "QueryFailed") and not hasattr(protocol, "QueryFailed")
    with pytest.raises(errors.QueryFailed, match="nvml: not recorded"):
        RecordedHost(tmp_path).query("nvml")
