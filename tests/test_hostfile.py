"""Hostfile parsing: DeepSpeed/MPI, pssh and plain formats; every bad line named with file:line."""

from __future__ import annotations

import pytest

from ncclcheck.errors import BadInput
from ncclcheck.hostfile import (Target, load_hostfile, parse_host_list, parse_hostfile,
                                take_nodes, validate_host)

# DeepSpeed docs ("Resource Configuration (multi-node)"), with Open MPI's max_slots and comments.
DEEPSPEED = """\
# DeepSpeed hostfile
worker-1 slots=4
worker-2 slots=4 max_slots=4   # rack 2

worker-3.cluster.local slots=8 max-slots=8
"""

# pssh (parallel-ssh) host file: [user@]host[:port], IPv6 in brackets.
PSSH = """\
root@10.0.0.1:2222
ubuntu@gpu-node-07
[fd00::2]:22
198.18.0.12
fe80::1%eth0
"""


def test_deepspeed_and_openmpi_slots():
    targets = parse_hostfile(DEEPSPEED, "hf")
    assert [(t.host, t.slots, t.line) for t in targets] == [
        ("worker-1", 4, 2), ("worker-2", 4, 3), ("worker-3.cluster.local", 8, 5)]
    assert all(t.user is None and t.port is None for t in targets)


def test_pssh_user_host_port():
    targets = parse_hostfile(PSSH, "hf")
    assert [(t.user, t.host, t.port) for t in targets] == [
        ("root", "10.0.0.1", 2222), ("ubuntu", "gpu-node-07", None), (None, "fd00::2", 22),
        (None, "198.18.0.12", None), (None, "fe80::1%eth0", None)]
    assert targets[0].destination == "root@10.0.0.1"
    assert targets[0].label == "10.0.0.1:2222"
    assert targets[2].label == "[fd00::2]:22"


def test_plain_list_with_crlf_and_trailing_dot():
    targets = parse_hostfile("node1\r\nnode2.example.com.\r\n\r\n", "hf")
    assert [t.host for t in targets] == ["node1", "node2.example.com."]


@pytest.mark.parametrize("line, why", [
    ("node1;reboot", "not a valid host name (only letters"),
    ("$(touch /tmp/pwned)", "not a valid host name"),
    ("`id`", "not a valid host name"),
    ("-oProxyCommand=sh", "starts with '-'"),
    ("node-", "starting or ending with '-'"),
    ("a..b", "an empty label"),
    ("x" * 64, "longer than 63"),
    ("999.1.1.1", "not a valid IPv4 address"),
    ("node1:8", "ambiguous: MPICH reads 8 as slots"),
    ("node1:70000", "not a number from 1 to 65535"),
    ("node1:ssh", "not a number from 1 to 65535"),
    ("[fd00::1", "'[' without ']'"),
    ("[node1]:22", "only for IPv6"),
    ("fd00::zz", "not a valid IPv6 address"),
    ("bad user@node1", "unknown field 'user@node1'"),
    ("-u@node1", "invalid user name"),
    ("node1 slots=0", "slots='0' is not a whole number from 1 to 65536"),
    ("node1 slots=65537", "slots='65537' is not a whole number"),
    ("node1 slots=" + "9" * 5000, "is not a whole number"),
    ("node1:" + "9" * 5000, "not a number from 1 to 65535"),
    ("node1 slots=four", "slots='four'"),
    ("node1 gpus=8", "unknown field 'gpus=8'"),
    ("node1 node2", "unknown field 'node2'"),
])
def test_bad_line_names_file_line_and_why(line, why):
    with pytest.raises(BadInput) as err:
        parse_hostfile(f"# header\ngood-node\n{line}\n", "hosts.txt")
    message = str(err.value)
    assert message.startswith("hosts.txt:3: ")
    assert why in message
    assert "\n" not in message


def test_duplicate_host_is_refused_with_both_lines():
    with pytest.raises(BadInput, match=r"^hf:3: NODE1 is listed twice \(first on line 1\)$"):
        parse_hostfile("node1 slots=8\nnode2\nNODE1\n", "hf")
    # the same host on two ports (containers on one machine) is two targets
    assert len(parse_hostfile("root@h:2222\nroot@h:2223\n")) == 2


def test_validate_host_accepts_names_and_addresses():
    for host in ("node1", "gpu_node_1", "a" * 63 + ".b", "10.0.0.1", "fd00::2", "::1",
                 "h100-node-01.cluster.local"):
        assert validate_host(host) == host
    with pytest.raises(ValueError, match="longer than 253"):
        validate_host(".".join(["a" * 60] * 5))


def test_host_list_option():
    assert [t.label for t in parse_host_list("node1,root@node2:2222,[fd00::3]:2200")] == [
        "node1", "node2:2222", "[fd00::3]:2200"]
    with pytest.raises(BadInput, match=r"^--hosts:2: "):
        parse_host_list("node1,no;de")


def test_take_nodes_first_n():
    targets = [Target("a"), Target("b"), Target("c")]
    assert [t.host for t in take_nodes(targets, 2)] == ["a", "b"]
    assert take_nodes(targets, None) == targets
    with pytest.raises(BadInput, match="--nodes 4 asks for more nodes than the 3 listed"):
        take_nodes(targets, 4, "hf")
    with pytest.raises(BadInput, match="at least 1"):
        take_nodes(targets, 0)
    with pytest.raises(BadInput, match="lists no hosts"):
        take_nodes([], None, "hf")


def test_load_hostfile(tmp_path):
    path = tmp_path / "hostfile"
    path.write_text(DEEPSPEED)
    assert [t.host for t in load_hostfile(path, nodes=2)] == ["worker-1", "worker-2"]
    with pytest.raises(BadInput, match=r"cannot read hostfile \(No such file or directory\)"):
        load_hostfile(tmp_path / "missing")
    (tmp_path / "empty").write_text("# nothing here\n\n")
    with pytest.raises(BadInput, match="lists no hosts"):
        load_hostfile(tmp_path / "empty")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00node")
    with pytest.raises(BadInput, match="cannot read hostfile"):
        load_hostfile(tmp_path / "binary")
