"""ncclcheck.remote.watchdog run locally: exit codes, and the whole tree stopped on
EOF/deadline/signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = pytest.mark.slow

WATCHDOG = [sys.executable, "-m", "ncclcheck.remote.watchdog"]


def marker() -> str:
    """A unique sleep duration: `sleep 600.<digits>` finds our processes in /proc."""
    return f"600.{uuid.uuid4().int % 10**9}"


def processes_with(arg: str) -> list[int]:
    """Live (non-zombie) processes whose argv contains ``arg``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if arg.encode() in argv and state != "Z":
            found.append(int(entry))
    return found


def wait_gone(arg: str, timeout: float = 5.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = processes_with(arg)
        if not left:
            return []
        time.sleep(0.05)
    return processes_with(arg)


def tree_script(mark: str) -> list[str]:
    """A child that starts a background sleep, a setsid'd sleep (leaves the group) and waits."""
    return ["sh", "-c", f'sleep {mark} & setsid sleep {mark} & echo started; wait']


def start(args: list[str], command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(WATCHDOG + args + ["--"] + command, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_started(proc: subprocess.Popen, mark: str) -> None:
    assert proc.stdout.readline().strip() == "started"
    end = time.monotonic() + 5
    while len(processes_with(mark)) < 2 and time.monotonic() < end:
        time.sleep(0.02)
    assert len(processes_with(mark)) == 2


def test_exit_code_and_output_pass_through():
    proc = start(["--no-stdin-watch"], ["sh", "-c", "echo out; echo err >&2; exit 7"])
    out, err = proc.communicate(timeout=10)
    assert (proc.returncode, out, err) == (7, "out\n", "err\n")


def test_stdin_eof_stops_the_whole_tree():
    mark = marker()
    proc = start([], tree_script(mark))
    wait_started(proc, mark)
    proc.stdin.close()  # as when the launcher closes its pipe or the ssh connection dies
    proc.wait(timeout=10)
    assert wait_gone(mark) == []


def test_deadline_exits_124_and_stops_the_tree():
    mark = marker()
    started = time.monotonic()
    proc = start(["--deadline", "1"], tree_script(mark))
    wait_started(proc, mark)
    proc.wait(timeout=10)  # stdin stays open: only the deadline can stop it
    assert proc.returncode == 124
    assert "deadline of 1 s passed" in proc.stderr.read()
    assert time.monotonic() - started < 5
    assert wait_gone(mark) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_signal_stops_the_tree(signum):
    mark = marker()
    proc = start([], tree_script(mark))
    wait_started(proc, mark)
    proc.send_signal(signum)
    proc.wait(timeout=10)
    assert proc.returncode == 128 + signum or proc.returncode == 128 + signal.SIGTERM
    assert wait_gone(mark) == []


def test_child_ignoring_sigterm_gets_sigkill_after_grace():
    mark = marker()
    proc = start(["--deadline", "0.5", "--grace", "0.5"],
                 ["sh", "-c", f"trap '' TERM; echo started; sleep {mark}; sleep {mark}"])
    assert proc.stdout.readline().strip() == "started"
    proc.wait(timeout=10)
    assert proc.returncode == 124
    assert wait_gone(mark) == []


def children_of(pid: int) -> str:
    """The ids of ``pid``'s children (zombies included until reaped), from /proc."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_stdin_bytes_reach_the_child_and_the_pipe_stays_watched():
    proc = start(["--stdin-bytes", "5"], ["sh", "-c", "cat; echo done"])
    proc.stdin.write("hello, and this is not for the child")
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert line == "hellodone\n"
    end = time.monotonic() + 10                 # the child prints, then exits and is reaped:
    while children_of(proc.pid) and time.monotonic() < end:  # closing stdin before that
        time.sleep(0.02)                        # would (rightly) stop it with SIGTERM
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


def test_stdin_bytes_minus_one_streams_every_line_as_it_comes_until_eof():
    # a session's agent (ncclcheck/bench/session.py): requests arrive one by one, each answered
    # before the next is written; end of file stops the child as before
    proc = start(["--stdin-bytes", "-1"], ["sh", "-c", "while read x; do echo got $x; done; "
                                                        "sleep 600"])
    import select

    try:
        for request in ("one", "two", "three"):
            proc.stdin.write(request + "\n")
            proc.stdin.flush()
            assert select.select([proc.stdout], [], [], 10)[0], f"no answer to {request}"
            assert proc.stdout.readline() == f"got {request}\n"
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM   # sleeping: stopped at end of file


def test_missing_command_exits_127_with_one_line():
    proc = start(["--no-stdin-watch"], ["/nonexistent/program"])
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 127
    assert err.strip() == ("ncclcheck-watchdog: cannot run /nonexistent/program: "
                           "No such file or directory")


def test_usage_errors_exit_2():
    for args in ([], ["--"], ["--deadline", "0", "--", "true"]):
        proc = subprocess.run(WATCHDOG + args, capture_output=True, text=True, timeout=10)
        assert proc.returncode == 2, args


def test_eof_is_noticed_even_when_the_child_never_reads_its_input():
    proc = start(["--stdin-bytes", "1000000"], ["sh", "-c", "echo started; sleep 600"])
    assert proc.stdout.readline().strip() == "started"
    proc.stdin.write("x" * 1_000_000)  # far more than a pipe holds: the feeder blocks, not EOF
    proc.stdin.close()
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
