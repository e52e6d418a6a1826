"""ncclcheck.remote: ssh argv building and quoting; run/run_all and cleanup on a netns cluster."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, two_nodes  # noqa: F401

from ncclcheck.errors import BadInput
from ncclcheck.hostfile import Target, load_hostfile
from ncclcheck.remote.quoting import remote_command, ssh_failure, validate_remote_python
from ncclcheck.remote.ssh import SSH, run_all

HOSTILE = ["$(touch {p})", "`touch {p}`", "; touch {p}", "| touch {p}", "&& touch {p}",
           "a'b\"c", "$HOME", "*", "~", "\\", "line\nbreak", "", " spaced  out ", "-n",
           "é✓", "{p} > {p}"]


def hostile_args(tmp: str) -> list[str]:
    return [arg.format(p=tmp) for arg in HOSTILE]


# ---- argv building (no network) -------------------------------------------------------------

def test_argv_layout_and_options():
    argv = SSH(connect_timeout=2.2).argv(Target("node1"), ["hostname"])
    assert argv == ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
                    "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                    "node1", "--", "hostname"]
    assert "-F" not in argv  # ~/.ssh/config is honoured unless --ssh-config is given


def test_argv_with_config_user_port_env(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n")
    argv = SSH(ssh_config=str(config), options=["ServerAliveInterval=15"]).argv(
        Target("fd00::2", user="root", port=2222), ["run", "x y"], env={"NCCL_DEBUG": "INFO"})
    assert argv[argv.index("-F") + 1] == str(config)
    assert argv[argv.index("-p") + 1] == "2222"
    assert argv[-3:] == ["root@fd00::2", "--", "env NCCL_DEBUG=INFO run 'x y'"]
    assert "ServerAliveInterval=15" in argv


def test_hostile_arguments_survive_a_real_shell_verbatim(tmp_path):
    """The remote shell sees exactly what sh -c sees here: every argument arrives unchanged."""
    pwned = tmp_path / "pwned"
    args = hostile_args(str(pwned))
    env = {"X": "$(touch %s)" % pwned, "Y": "a b'c"}
    command = remote_command([sys.executable, "-c", "import json, os, sys; "
                              "print(json.dumps([sys.argv[1:], os.environ['X'], "
                              "os.environ['Y']]))"] + args, env)
    assert shlex.split(command)[-len(args):] == args
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=10)
    assert json.loads(out.stdout) == [args, env["X"], env["Y"]]
    assert not pwned.exists()


@pytest.mark.parametrize("env, why", [({"A B": "1"}, "'A B'"), ({"1X": "1"}, "'1X'"),
                                      ({"X;id": "1"}, "'X;id'"), ({"": "1"}, "''")])
def test_bad_env_names_are_refused(env, why):
    with pytest.raises(BadInput, match=why):
        remote_command(["true"], env)


def test_remote_python_and_destination_validation(tmp_path):
    with pytest.raises(BadInput, match="absolute path"):
        validate_remote_python("python3")
    with pytest.raises(BadInput, match="absolute path"):
        validate_remote_python("/usr/bin/python3 -c 'import os'")
    with pytest.raises(BadInput, match="starts with '-'"):
        SSH().argv(Target("-oProxyCommand=touch_x"), ["true"])
    with pytest.raises(BadInput, match="no such file"):
        SSH(ssh_config=str(tmp_path / "missing"))
    with pytest.raises(BadInput, match="empty remote command"):
        remote_command([])


def test_wrap_puts_the_watchdog_first():
    ssh = SSH(remote_python="/opt/py/bin/python3")
    assert ssh.wrap(["a", "b"], deadline=12.5, stdin_bytes=4) == [
        "/opt/py/bin/python3", "-m", "ncclcheck.remote.watchdog", "--deadline", "12.5",
        "--stdin-bytes", "4", "--", "a", "b"]
    assert SSH(watchdog=False).wrap(["a"], 3) == ["a"]
    assert SSH().remote_python == sys.executable


@pytest.mark.parametrize("stderr, expected", [
    ("ssh: Could not resolve hostname nodex: Name or service not known\n",
     "n: ssh: Could not resolve hostname nodex: Name or service not known"),
    ("kex_exchange_identification: read: Connection reset by peer\r\n",
     "n: kex_exchange_identification: read: Connection reset by peer"),
    ("Host key verification failed.\n", "n: host key verification failed (check known_hosts)"),
    ("", "n: ssh failed (exit 255)"),
])
def test_ssh_failure_lines(stderr, expected):
    assert ssh_failure("n", stderr) == expected


def test_output_held_open_by_a_leftover_does_not_hang_the_reader():
    """A ControlPersist master or ProxyCommand can keep ssh's pipes open after ssh exits."""
    from ncclcheck.remote.process import RemoteProcess

    mark = marker()
    process = RemoteProcess(Target("localhost"), ["sh", "-c", f"sleep {mark} & echo hi"],
                            keep_stdin_open=False)
    started = time.monotonic()
    result = process.result(timeout=10)
    try:
        assert (result.returncode, result.stdout, result.error) == (0, "hi\n", None)
        assert time.monotonic() - started < 3
    finally:
        process.kill()  # the sleep is in ssh's process group: kill() takes it too
    end = time.monotonic() + 5
    while process_alive(mark) and time.monotonic() < end:
        time.sleep(0.05)
    assert not process_alive(mark)


def process_alive(arg: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if arg.encode() in f.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat") as g:
                        return g.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            continue
    return False


# ---- on a real 2-node cluster ---------------------------------------------------------------

def leftovers(cluster, node, timeout: float = 5.0) -> list[str]:
    """Command lines of processes in ``node`` other than its sshd listener, after they settle."""
    node = cluster.node(node)
    end = time.monotonic() + timeout
    while True:
        left = []
        for pid in cluster.pids(node):
            if pid == node.sshd_pid:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    left.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
            except OSError:
                continue
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def marker() -> str:
    return f"600.{uuid.uuid4().int % 10**9}"


@pytest.fixture(scope="module")
def ssh(two_nodes):
    return SSH(ssh_config=two_nodes.ssh_config, connect_timeout=2)


@pytest.mark.netns
@needs_netns
@pytest.mark.parametrize("concurrency", [32, 1])
def test_run_all_keeps_healthy_results_when_a_node_is_unreachable(two_nodes, ssh, concurrency):
    targets = load_hostfile(two_nodes.hostfile) + [Target(two_nodes.unreachable_addr)]
    started = time.monotonic()
    results = run_all(ssh, targets, ["hostname"], timeout=20, concurrency=concurrency)
    elapsed = time.monotonic() - started
    assert list(results) == [t.label for t in targets]
    good = [results[n.addr] for n in two_nodes.nodes]
    assert [r.stdout.strip() for r in good] == ["node1", "node2"]
    assert all(r.ok and r.returncode == 0 and r.error is None for r in good)
    bad = results[two_nodes.unreachable_addr]
    assert not bad.ok and bad.returncode == 255 and not bad.timed_out
    assert bad.error.startswith(f"{two_nodes.unreachable_addr}: ssh: connect to host "
                                f"{two_nodes.unreachable_addr} port 22: ")
    assert "\n" not in bad.error
    assert bad.duration_s < 2 + 1.5  # ConnectTimeout=2, not the 20 s command timeout
    assert elapsed < (4 if concurrency > 1 else 8)


@pytest.mark.netns
@needs_netns
def test_hostile_argv_env_and_input_arrive_verbatim_on_the_node(two_nodes, ssh, tmp_path):
    pwned = tmp_path / "pwned"  # the nodes share this filesystem: a run command would create it
    args = hostile_args(str(pwned))
    code = textwrap.dedent("""
        import json, os, socket, sys
        print(json.dumps([socket.gethostname(), sys.argv[1:], os.environ["HOSTILE"],
                          sys.stdin.read()]))
    """)
    env = {"HOSTILE": f"$(touch {pwned}) `touch {pwned}`"}
    result = ssh.run(Target("node2"), [sys.executable, "-c", code] + args, timeout=20, env=env,
                     input="stdin ✓ $(touch x)\n")
    assert result.ok, result.error
    assert json.loads(result.stdout) == ["node2", args, env["HOSTILE"], "stdin ✓ $(touch x)\n"]
    assert not pwned.exists()
    assert leftovers(two_nodes, "node2") == []


@pytest.mark.netns
@needs_netns
def test_nonzero_exit_and_per_node_argv(two_nodes, ssh):
    def argv_for(target):
        if target.host == "198.18.255.254":
            raise ValueError("no argv for this one")
        return ["sh", "-c", f"echo {target.host} >&2; exit {target.host[-1]}"]

    targets = load_hostfile(two_nodes.hostfile) + [Target("198.18.255.254")]
    results = run_all(ssh, targets, argv_for, timeout=20)
    codes = {label: (r.returncode, r.error) for label, r in results.items()}
    a, b = two_nodes.addrs
    assert codes == {a: (1, f"{a}: exited with code 1: {a}"),
                     b: (2, f"{b}: exited with code 2: {b}"),
                     "198.18.255.254": (None, "198.18.255.254: no argv for this one")}


@pytest.mark.netns
@needs_netns
def test_timeout_returns_on_time_and_stops_the_remote_tree(two_nodes, ssh):
    mark = marker()
    started = time.monotonic()
    result = ssh.run(Target("node1"), ["sh", "-c", f"sleep {mark} & setsid sleep {mark} & wait"],
                     timeout=1.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.returncode is None
    assert result.error == "node1: timed out after 1.5 s"
    assert 1.5 <= elapsed < 1.5 + 1.5
    assert leftovers(two_nodes, "node1") == []


@pytest.mark.netns
@needs_netns
def test_killing_the_local_ssh_mid_run_leaves_nothing_on_the_node(two_nodes, ssh):
    mark = marker()
    process = ssh.start(Target("node2"), ["sh", "-c", f"sleep {mark} & setsid sleep {mark} & "
                                                      "echo running; wait"])
    try:
        assert process.stdout.wait_for("^running$", timeout=20), process.stderr.text()
        end = time.monotonic() + 5           # "running" can come before setsid has exec'd
        while leftovers(two_nodes, "node2", 0).count(f"sleep {mark}") < 2 \
                and time.monotonic() < end:
            time.sleep(0.05)
        assert leftovers(two_nodes, "node2", 0).count(f"sleep {mark}") == 2
        os.kill(process.pid, signal.SIGKILL)  # the local ssh dies abruptly
        assert process.wait(5) == -signal.SIGKILL
        assert leftovers(two_nodes, "node2") == []
    finally:
        process.kill()                        # a failed assertion leaves nothing for the next


@pytest.mark.netns
@needs_netns
def test_launcher_death_stops_local_ssh_and_remote_tree(two_nodes):
    """SIGKILL the launching python: its ssh sees stdin EOF and the node's watchdog cleans up."""
    mark = marker()
    launcher = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from ncclcheck.hostfile import Target
        from ncclcheck.remote.ssh import SSH
        p = SSH(ssh_config={two_nodes.ssh_config!r}).start(Target("node1"),
                ["sh", "-c", "sleep {mark} & echo running; wait"])
        assert p.stdout.wait_for("running", 20)
        print(p.pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    ssh_pid = int(launcher.stdout.readline())
    launcher.kill()
    launcher.wait(5)
    end = time.monotonic() + 5
    while os.path.exists(f"/proc/{ssh_pid}") and time.monotonic() < end:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{ssh_pid}") or "Z" in open(f"/proc/{ssh_pid}/stat").read()
    assert leftovers(two_nodes, "node1") == []


@pytest.mark.netns
@needs_netns
def test_terminate_and_remote_deadline(two_nodes, ssh):
    process = ssh.start(Target("node1"), ["sh", "-c", "echo up; sleep 600"])
    assert process.stdout.wait_for("up", 20)
    process.terminate()
    assert process.wait(5) is not None
    assert leftovers(two_nodes, "node1") == []
    process = ssh.start(Target("node2"), ["sleep", "600"], deadline=1)
    result = process.result(timeout=20)
    assert result.returncode == 124 and result.timed_out
    assert result.error == "node2: timed out (remote deadline)"
    assert leftovers(two_nodes, "node2") == []


@pytest.mark.netns
@needs_netns
def test_streamed_lines_and_large_output_do_not_block(two_nodes, ssh):
    lines = []
    process = ssh.start(Target("node1"), [sys.executable, "-c",
                                          "import sys\nfor i in range(3): print(i, flush=True)\n"
                                          "sys.stderr.write('e' * 3_000_000)"],
                        on_stdout_line=lines.append)
    result = process.result(timeout=20)
    assert result.ok and lines == ["0", "1", "2"] and len(result.stderr) == 3_000_000


@pytest.mark.netns
@needs_netns
def test_clear_errors_for_bad_key_and_missing_remote_python(two_nodes, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    config = tmp_path / "ssh_config"
    config.write_text(open(two_nodes.ssh_config).read().replace(
        two_nodes.key, str(tmp_path / "k")))
    denied = SSH(ssh_config=str(config)).run(Target("node1"), ["true"], timeout=20)
    assert denied.error == "node1: permission denied (publickey)"
    missing = SSH(ssh_config=two_nodes.ssh_config, remote_python="/nonexistent/python3").run(
        Target("node2"), ["true"], timeout=20)
    assert missing.error == ("node2: /nonexistent/python3 not found on the remote node "
                             "(set --remote-python)")
    bare = "/usr/bin/python3"  # Debian's python, without ncclcheck (the tests use pyenv's)
    if os.path.exists(bare) and subprocess.run([bare, "-c", "import ncclcheck"], cwd="/",
                                               capture_output=True).returncode != 0:
        result = SSH(ssh_config=two_nodes.ssh_config, remote_python=bare).run(
            Target("node1"), ["true"], timeout=20)
        assert result.error == ("node1: ncclcheck is not installed for the remote python "
                                "(set --remote-python)")
    no_binary = SSH(ssh_binary="/nonexistent/ssh").run(Target("node2"), ["true"], timeout=5)
    assert no_binary.error == "node2: cannot run /nonexistent/ssh: No such file or directory"
