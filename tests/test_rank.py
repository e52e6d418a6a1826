"""ncclcheck rank: finding this node in a hostfile, ports, shell output; on every netns node."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, two_nodes  # noqa: F401

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.hostfile import Target, parse_hostfile
from ncclcheck.rank import (Identity, find_rank, format_shell, local_identity, parse_port_range,
                            rank_assignments)

ME = Identity({"10.1.0.2", "fd00::2"}, {"gpu-02", "gpu-02.cluster.local"})
HOSTS = parse_hostfile("gpu-01 slots=8\ngpu-02 slots=8\ngpu-03 slots=8\n", "hf")


def no_dns(host):
    return None


def test_match_by_name_address_and_case():
    assert find_rank(HOSTS, ME, no_dns) == 1
    assert find_rank(parse_hostfile("10.1.0.1\n10.1.0.2\n"), ME, no_dns) == 1
    assert find_rank(parse_hostfile("[fd00::1]:22\n[FD00:0::2]:22\n"), ME, no_dns) == 1
    assert find_rank(parse_hostfile("a\nGPU-02.Cluster.Local.\n"), ME, no_dns) == 1


def test_match_through_resolution_ignores_loopback():
    dns = {"n1": {"10.1.0.1"}, "n2": {"10.1.0.2"}, "n3": {"127.0.1.1"}}
    assert find_rank(parse_hostfile("n1\nn2\nn3\n"), ME, dns.get) == 1
    # Debian maps every node's own name to 127.0.1.1: that must not make every node match
    me_local = Identity({"10.9.9.9"}, {"other"})
    with pytest.raises(BadInput, match="is not in"):
        find_rank(parse_hostfile("n3\n"), me_local, dns.get)


def test_not_listed_is_one_clear_line():
    with pytest.raises(BadInput) as err:
        find_rank(parse_hostfile("gpu-01\ngpu-09\n10.1.0.7\n"), ME, no_dns, "hosts.txt")
    message = str(err.value)
    assert message.startswith("this node (names gpu-02, gpu-02.cluster.local; addresses ")
    assert "is not in hosts.txt (3 entries; 2 names did not resolve: gpu-01, gpu-09)" in message
    assert "\n" not in message


def test_listed_twice_is_refused():
    with pytest.raises(BadInput, match=r"matches 2 entries of hf: line 1 \(gpu-02\), "
                                       r"line 2 \(10.1.0.2\); list each node once"):
        find_rank(parse_hostfile("gpu-02\n10.1.0.2\n"), ME, no_dns, "hf")
    dns = {"a": {"10.1.0.2"}, "b": {"10.1.0.2"}}
    with pytest.raises(BadInput, match="matches 2 entries"):
        find_rank(parse_hostfile("a\nb\n"), ME, dns.get)


def test_master_port_choice():
    master = Identity({"10.1.0.1"}, {"gpu-01"})
    assert rank_assignments(HOSTS, master, (29500, 29510), is_free=lambda p: p != 29501,
                            resolver=no_dns)["MASTER_PORT"] == 29500
    # 29500 busy on the master: the workers cannot know, so the master fails with the fix
    with pytest.raises(NcclcheckError, match=r"MASTER_PORT 29500 is busy on this node \(the "
                       r"master\).*run ncclcheck rank on every node with --master-port 29502"):
        rank_assignments(HOSTS, master, (29500, 29510), is_free=lambda p: p > 29501,
                         resolver=no_dns)
    worker = rank_assignments(HOSTS, ME, (29500, 29510), is_free=lambda p: False,
                              resolver=no_dns)
    assert worker["MASTER_PORT"] == 29500 and worker["NODE_RANK"] == 1  # not checked off-master
    with pytest.raises(NcclcheckError, match="with --master-port with a port free"):
        rank_assignments(HOSTS, master, (29500, 29501), is_free=lambda p: False, resolver=no_dns)
    with pytest.raises(NcclcheckError, match="with --master-port with a port free"):
        rank_assignments(HOSTS, master, (29500, 29500), is_free=lambda p: False, resolver=no_dns)
    # one node: nobody else has to agree, so the first free port is taken
    notes = []
    alone = rank_assignments(parse_hostfile("gpu-01 slots=8\n"), master, (29500, 29510),
                             is_free=lambda p: p > 29501, resolver=no_dns, notes=notes)
    assert alone["MASTER_PORT"] == 29502 and notes == ["port 29500 is busy on this node; "
                                                       "MASTER_PORT=29502"]
    with pytest.raises(NcclcheckError, match="MASTER_PORT 6000 is in use"):
        rank_assignments(HOSTS, master, master_port=6000, is_free=lambda p: False,
                         resolver=no_dns)
    mixed = parse_hostfile("gpu-01 slots=8\ngpu-02 slots=4\n")
    assert "NPROC_PER_NODE" not in rank_assignments(mixed, ME, resolver=no_dns,
                                                    is_free=lambda p: True)


def test_localhost_hostfile_is_this_node():
    """DeepSpeed's single-node hostfile; several nodes with localhost are refused (any node)."""
    for text in ("localhost slots=2\n", "127.0.0.1 slots=2\n", "[::1]:22\n"):
        values = rank_assignments(parse_hostfile(text, "hf"), ME, resolver=no_dns,
                                  is_free=lambda p: True)
        assert (values["NNODES"], values["NODE_RANK"]) == (1, 0)
    with pytest.raises(BadInput, match="hf: line 2 \\(localhost\\) means a different machine"):
        find_rank(parse_hostfile("gpu-02\nlocalhost\n", "hf"), ME, no_dns, "hf")


def test_real_port_check_sees_a_listener():
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        me = Identity({"198.18.9.1"}, set())
        values = rank_assignments([Target("198.18.9.1")], me, (port, port + 20), resolver=no_dns)
    assert port < values["MASTER_PORT"] <= port + 20


def test_port_range_parsing():
    assert parse_port_range("29500-29599") == (29500, 29599)
    assert parse_port_range("29500") == parse_port_range("29500-") == (29500, 29500)
    for bad in ("x", "10-5", "0-3", "1-70000", "-5"):
        with pytest.raises(BadInput, match="--port-range"):
            parse_port_range(bad)


def test_shell_output_evaluates_to_the_values():
    values = {"NNODES": 2, "NODE_RANK": 1, "MASTER_ADDR": "fd00::2", "MASTER_PORT": 29500}
    script = format_shell(values, export=True) + \
        'echo "$NNODES|$NODE_RANK|$MASTER_ADDR|$MASTER_PORT"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
    assert out == "2|1|fd00::2|29500\n"


def test_local_identity_has_no_loopback():
    me = local_identity()
    assert socket.gethostname().lower() in me.names
    assert not any(a.startswith("127.") or a == "::1" for a in me.addresses)


def cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", "rank", *args], capture_output=True,
                          text=True, timeout=30, **kw)


def test_cli_errors_exit_2_with_one_line(tmp_path):
    hf = tmp_path / "hf"
    hf.write_text("198.18.200.1\n198.18.200.2\n")
    missing = cli("--hostfile", str(hf))
    assert missing.returncode == 2 and missing.stdout.startswith("(exit 2)")  # for eval
    assert missing.stderr.startswith("ncclcheck: error: this node (names ")
    assert missing.stderr.count("\n") == 1
    bad = cli("--hostfile", str(tmp_path / "nope"))
    assert (bad.returncode, bad.stderr) == (
        2, f"ncclcheck: error: {tmp_path / 'nope'}: cannot read hostfile "
           "(No such file or directory)\n")
    local = tmp_path / "local"
    local.write_text("localhost slots=2\n")
    single = cli("--hostfile", str(local), "--json")
    assert single.returncode == 0, single.stderr
    assert json.loads(single.stdout)["NPROC_PER_NODE"] == 2
    too_many = cli("--hostfile", str(hf), "--nodes", "3")
    assert too_many.returncode == 2 and "--nodes 3 asks for more" in too_many.stderr


@pytest.mark.netns
@needs_netns
def test_every_node_finds_its_rank_over_ssh(two_nodes, tmp_path):
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.remote.ssh import SSH, run_all

    names = tmp_path / "hostfile-names"  # node1-eth0 resolves only through the nodes' /etc/hosts
    names.write_text("".join(f"{n.name}-eth0 slots=4\n" for n in two_nodes.nodes))
    ssh = SSH(ssh_config=two_nodes.ssh_config)
    targets = load_hostfile(two_nodes.hostfile)
    for hostfile, master in ((two_nodes.hostfile, two_nodes.nodes[0].addr),
                             (str(names), "node1-eth0")):
        results = run_all(ssh, targets, [sys.executable, "-m", "ncclcheck", "rank", "--hostfile",
                                         hostfile, "--json"], timeout=30)
        got = [json.loads(r.stdout) if r.ok else r.error for r in results.values()]
        assert [g["NODE_RANK"] for g in got] == [0, 1], got
        assert {g["MASTER_ADDR"] for g in got} == {master}
        assert {g["NNODES"] for g in got} == {2}
    only_first = run_all(ssh, targets[1:], [sys.executable, "-m", "ncclcheck", "rank",
                                            "--hostfile", two_nodes.hostfile, "--nodes", "1"],
                         timeout=30)
    result = only_first[targets[1].label]
    assert result.returncode == 2
    assert result.error.startswith(f"{targets[1].label}: exited with code 2: ncclcheck: error: "
                                   "this node (names node2")
    shell = ssh.run(targets[1], ["sh", "-c", f'eval "$({sys.executable} -m ncclcheck rank '
                                             f'--hostfile {two_nodes.hostfile})"; '
                                             'echo "$NODE_RANK/$NNODES@$MASTER_ADDR"'], timeout=30)
    assert shell.stdout.strip() == f"1/2@{two_nodes.nodes[0].addr}"


@pytest.mark.netns
@needs_netns
def test_master_and_worker_agree_on_the_port_while_29500_is_busy(two_nodes):
    """The README's flow with 29500 taken on the master: never two different MASTER_PORTs."""
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.remote.ssh import SSH

    ssh = SSH(ssh_config=two_nodes.ssh_config)
    master, worker = load_hostfile(two_nodes.hostfile)
    holder = ("import json, socket, subprocess, sys\n"
              "s = socket.socket(); s.bind(('0.0.0.0', 29500)); s.listen()\n"
              "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(json.dumps([r.returncode, r.stdout, r.stderr]))\n")
    rank = [sys.executable, "-m", "ncclcheck", "rank", "--hostfile", two_nodes.hostfile, "--json"]

    def on_master(*extra):
        result = ssh.run(master, [sys.executable, "-c", holder, *rank, *extra], timeout=30)
        return json.loads(result.stdout.strip().splitlines()[-1])

    def on_worker(*extra):
        result = ssh.run(worker, [*rank, *extra], timeout=30)
        return result.returncode, result.stdout, result.stderr

    code, out, err = on_master()
    assert (code, out) == (1, ""), (code, out, err)
    assert "MASTER_PORT 29500 is busy on this node (the master)" in err
    assert "run ncclcheck rank on every node with --master-port 29501" in err
    code, out, err = on_worker()
    assert code == 0 and json.loads(out)["MASTER_PORT"] == 29500, err
    ports = set()
    for code, out, err in (on_master("--master-port", "29501"),
                           on_worker("--master-port", "29501")):
        assert code == 0, err
        ports.add(json.loads(out)["MASTER_PORT"])
    assert ports == {29501}


# -- bounds (issue 16) -------------------------------------------------------------------------

def _ncclcheck(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120)


def test_endless_hostfile_is_exit_2_quickly():
    import time

    started = time.monotonic()
    out = _ncclcheck("rank", "--hostfile", "/dev/zero")
    assert out.returncode == 2 and "larger than" in out.stderr, out.stderr
    assert time.monotonic() - started < 10


def test_3000_unresolvable_names_exit_2_within_60_s(tmp_path):
    import time

    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"nohost-{i}.invalid\n" for i in range(3000)))
    started = time.monotonic()
    out = _ncclcheck("rank", "--hostfile", str(hostfile))
    assert out.returncode == 2, out.stderr
    assert "not in" in out.stderr and "internal error" not in out.stderr
    assert time.monotonic() - started < 60


def test_resolver_pool_is_bounded_and_has_a_deadline():
    import threading
    import time

    from ncclcheck.rank import resolve_all

    live: list[int] = []
    lock = threading.Lock()
    running = [0]

    def slow(host):
        with lock:
            running[0] += 1
            live.append(running[0])
        time.sleep(0.05 if host != "stuck" else 5)
        with lock:
            running[0] -= 1
        return {"198.18.0.1"} if host == "good" else None

    started = time.monotonic()
    got = resolve_all(["stuck"] + ["x"] * 200 + ["good"], slow, workers=8, per_name=1,
                      overall=2)
    assert max(live) <= 8
    assert got[0] is None and got[-1] == {"198.18.0.1"}
    assert time.monotonic() - started < 3


# -- the README's eval recipe under bash -e (issue 27 item 6) -----------------------------------

def _bash_e(tmp_path, rank_args: str) -> subprocess.CompletedProcess:
    """The README's recipe as a script: eval rank's output, then what torchrun would get."""
    import shlex

    script = tmp_path / "launch.sh"
    script.write_text(
        "set -e\n"
        f'eval "$({shlex.quote(sys.executable)} -m ncclcheck rank {rank_args})"\n'
        'echo "torchrun --nnodes=$NNODES --node-rank=$NODE_RANK"\n')
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)


def test_bash_e_stops_at_eval_when_rank_fails(tmp_path):
    import shlex

    listed = tmp_path / "hosts"
    listed.write_text("198.18.200.1\n198.18.200.2\n")        # this node is not in it: exit 2
    out = _bash_e(tmp_path, f"--hostfile {shlex.quote(str(listed))}")
    assert out.returncode == 2 and "torchrun" not in out.stdout, out
    assert "is not in" in out.stderr
    bad_flag = _bash_e(tmp_path, f"--hostfile {shlex.quote(str(listed))} --nope")
    assert bad_flag.returncode == 2 and "torchrun" not in bad_flag.stdout
    # this node is the master and its MASTER_PORT is taken: rank's exit 1 reaches the script
    master = tmp_path / "master"
    master.write_text(f"{socket.gethostname()}\n198.18.200.2\n")
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = _bash_e(tmp_path, f"--hostfile {shlex.quote(str(master))} --master-port {port}")
    assert busy.returncode == 1 and "torchrun" not in busy.stdout, busy
    good = _bash_e(tmp_path, f"--hostfile {shlex.quote(str(master))}")
    assert good.returncode == 0 and "torchrun --nnodes=2 --node-rank=0" in good.stdout, good
    # --json readers get no shell on stdout
    as_json = cli("--hostfile", str(listed), "--json")
    assert as_json.returncode == 2 and as_json.stdout == ""
