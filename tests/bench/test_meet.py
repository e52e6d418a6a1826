"""The rendezvous checks every rank makes before any collective (bench/meet.py), with real
sockets and a real TCPStore on this machine."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ncclcheck.bench import meet


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_name_that_never_resolves_is_named_with_the_fix():
    with pytest.raises(meet.RendezvousError) as err:
        meet.resolve("no-such-node.invalid", {})
    assert str(err.value).startswith("the rendezvous address no-such-node.invalid does not "
                                     "resolve (")
    assert "fix: pass --master-addr" in str(err.value)


def test_inside_slurm_an_unknown_name_says_slurm_has_no_address_for_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol: Slurm cannot answer
    with pytest.raises(meet.RendezvousError, match="Slurm knows no NodeAddr for it"):
        meet.resolve("no-such-node.invalid", {"SLURM_JOB_ID": "7"})


def test_names_and_literals_resolve():
    assert meet.resolve("localhost", {})[0].startswith("127.")
    assert meet.resolve("198.18.0.11", {}) == ("198.18.0.11", "literal")


def test_node_addr_is_read_from_scontrol_output():
    text = ("NodeName=node1 Arch=x86_64 CoresPerSocket=1\n   CPUAlloc=0 CPUTot=2\n"
            "   NodeAddr=198.18.0.11 NodeHostName=node1 Version=22.05.8\n")
    assert meet.parse_node_addr(text) == "198.18.0.11"
    assert meet.parse_node_addr("NodeName=n NodeAddr=(null)") is None


def test_rank_0_knows_its_own_addresses():
    assert meet.is_local("127.0.0.1")
    assert not meet.is_local("198.18.254.254")  # benchmark space: on no interface here


def test_an_address_nobody_listens_on_fails_at_the_deadline_naming_it():
    port = closed_port()
    start = time.monotonic()
    with pytest.raises(meet.RendezvousError) as err:
        meet.wait_reachable("127.0.0.1", port, "node1 (127.0.0.1)", time.monotonic() + 1.0)
    assert 0.9 < time.monotonic() - start < 3
    assert f"cannot reach the rendezvous at node1 (127.0.0.1):{port}" in str(err.value)
    assert "Connection refused" in str(err.value)


def test_reaching_a_listener_returns_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        meet.wait_reachable("127.0.0.1", s.getsockname()[1], "x", time.monotonic() + 5)


@pytest.mark.torch
def test_rank_0_names_the_ranks_that_never_came():
    dist = pytest.importorskip("torch.distributed")
    ident = {"rank": 0, "world_size": 3, "master_addr": "127.0.0.1",
             "master_port": closed_port()}
    start = time.monotonic()
    with pytest.raises(meet.RendezvousError, match=r"ranks 1, 2 did not reach the rendezvous "
                                                   r"at 127.0.0.1:\d+ within 1 s"):
        meet.join(dist, ident, 60, {}, host="n1", deadline_s=1.0)
    assert time.monotonic() - start < 5


@pytest.mark.torch
def test_two_ranks_meet_and_the_store_gets_the_full_timeout():
    dist = pytest.importorskip("torch.distributed")
    port = closed_port()
    stores: dict = {}

    def rank(r: int) -> None:
        ident = {"rank": r, "world_size": 2, "master_addr": "localhost", "master_port": port}
        stores[r] = meet.join(dist, ident, 60, {}, host=f"n{r}", deadline_s=10)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(stores) == [0, 1]
    assert stores[0].get("ncclcheck/joined/1") == b"n1"
    assert stores[0].timeout.total_seconds() == 60


def test_rank_0_refuses_an_address_that_is_not_its_own():
    with pytest.raises(meet.RendezvousError, match="rank 0 hosts the rendezvous store but "
                                                   "198.18.254.254 is not an address of this"):
        meet.join(None, {"rank": 0, "world_size": 2, "master_addr": "198.18.254.254",
                         "master_port": 1}, 60, {})


@pytest.mark.torch
def test_a_busy_port_still_says_pass_a_free_master_port_and_names_no_firewall():
    """The port is taken by another listener: that, not a firewall (issue 27, item 10)."""
    dist = pytest.importorskip("torch.distributed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert meet.port_taken("127.0.0.1", port)
        with pytest.raises(meet.RendezvousError) as err:
            meet.join(dist, {"rank": 0, "world_size": 2, "master_addr": "127.0.0.1",
                             "master_port": port}, 60, {}, host="n1", deadline_s=2.0)
    assert "(the port is in use); fix: pass a free --master-port" in str(err.value)
    assert "firewall" not in str(err.value)
    assert not meet.port_taken("127.0.0.1", port)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.parametrize("addr,said", [
    ("no-such-node.invalid", "the rendezvous address no-such-node.invalid does not resolve ("),
    ("198.18.254.254", "rank 0 hosts the rendezvous store but 198.18.254.254 is not an address "
                       "of this node; fix: pass --master-addr"),
])
def test_inside_a_launcher_a_wrong_address_fails_before_torch_is_imported(tmp_path, addr, said):
    """A rank torchrun (or srun, mpirun, DeepSpeed) started checks the address before it
    imports torch, the seconds of its start, and has no logs to keep yet."""
    env = {**os.environ, "TORCHELASTIC_RUN_ID": "t", "RANK": "0", "WORLD_SIZE": "2",
           "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": addr,
           "MASTER_PORT": "29500", "TMPDIR": str(tmp_path)}
    code = "import sys, runpy\ntry:\n    runpy.run_module('ncclcheck', run_name='__main__')\n" \
           "finally:\n    print('torch' in sys.modules)"     # after bench gave stdout back
    out = subprocess.run([sys.executable, "-c", code, "bench", "--timeout", "30"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr[-2000:]
    assert out.stderr.startswith(f"ncclcheck: error: rank 0 on {socket.gethostname()}: {said}")
    assert out.stdout == "False\n"
    assert list(tmp_path.iterdir()) == []
