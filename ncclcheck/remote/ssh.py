"""Run commands on many nodes over the system ``ssh``, with deadlines and nothing left behind.

Each remote command is an argv list. The one string ssh sends to the remote shell is built only
with :func:`shlex.join`, so an argument such as ``$(touch /tmp/pwned)`` arrives verbatim. The ssh
argv is::

    ssh -T -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5
        [-F ssh_config] [-p port] [user@]host -- '<remote command>'

``~/.ssh/config`` is honoured (aliases, ProxyJump, ControlMaster) unless an ``ssh_config`` is given.

Every command runs under :mod:`ncclcheck.remote.watchdog` on the remote node, and the local side
keeps ssh's stdin open for the command's whole life. Closing that pipe, killing the local ssh, losing
the connection, or the launcher dying all reach the watchdog as end of file on its stdin, and it
stops the remote process tree. A remote deadline (the local timeout plus a few seconds) stops it
even when the connection hangs without closing.

Example (a cluster from ``scripts/netns-cluster``)::

    ssh = SSH(ssh_config="/tmp/ncclcheck-netns-nc/ssh_config")
    results = run_all(ssh, load_hostfile(hostfile), ["hostname"], timeout=30)
    for label, result in results.items():
        print(label, result.stdout.strip() if result.ok else result.error)

This module holds :class:`SSH` and :func:`run_all`; beside it :mod:`ncclcheck.remote.quoting`
(what reaches the remote shell, why ssh failed) and :mod:`ncclcheck.remote.process` (one running
remote command, its output and result).
"""

from __future__ import annotations

import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Union

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.hostfile import Target
from ncclcheck.remote.process import RemoteProcess, RemoteResult, stop_all
from ncclcheck.remote.quoting import remote_command, validate_env, validate_remote_python

__all__ = ["REMOTE_DEADLINE_MARGIN", "SSH", "RemoteArgv", "run_all"]

#: Seconds the remote watchdog's deadline adds to the local timeout (local side acts first).
REMOTE_DEADLINE_MARGIN = 5.0
RemoteArgv = Union[list, Callable[[Target], list]]


class SSH:
    """Builds and runs ssh commands for :class:`~ncclcheck.hostfile.Target` nodes.

    Args:
        ssh_config: an ssh_config file passed as ``-F`` (None: ssh's own, ``~/.ssh/config``).
        connect_timeout: seconds for ssh's TCP connect (``ConnectTimeout``, rounded up).
        remote_python: the python that runs ``ncclcheck.remote.watchdog`` remotely; default this
            node's ``sys.executable`` (as DeepSpeed's launcher does).
        watchdog: wrap remote commands in the watchdog (needs ncclcheck on the remote python).
        ssh_binary: the ssh program.
        options: extra ``-o`` options, e.g. ``["ServerAliveInterval=15"]``.
    """

    def __init__(self, ssh_config: str | None = None, connect_timeout: float = 10,
                 remote_python: str | None = None, watchdog: bool = True,
                 ssh_binary: str = "ssh", options: list[str] | tuple = ()) -> None:
        if connect_timeout <= 0:
            raise BadInput(f"--connect-timeout must be positive, not {connect_timeout:g}")
        if ssh_config is not None and not os.path.isfile(ssh_config):
            raise BadInput(f"--ssh-config {ssh_config}: no such file")
        self.ssh_config = ssh_config
        self.connect_timeout = connect_timeout
        self.remote_python = validate_remote_python(remote_python or sys.executable)
        self.watchdog = watchdog
        self.ssh_binary = ssh_binary
        self.options = list(options)

    def argv(self, target: Target, remote_argv: list[str], env: dict | None = None) -> list[str]:
        """The local ssh argv that runs ``remote_argv`` (exactly, no watchdog) on ``target``.

        >>> argv = SSH(connect_timeout=2.5).argv(Target("node1", user="root", port=2222),
        ...                                      ["echo", "a b"])
        >>> argv[:6]
        ['ssh', '-T', '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=3']
        >>> argv[-5:]
        ['-p', '2222', 'root@node1', '--', "echo 'a b'"]
        """
        argv = [self.ssh_binary, "-T", "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={max(1, math.ceil(self.connect_timeout))}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        for option in self.options:
            argv += ["-o", option]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        if target.port is not None:
            argv += ["-p", str(int(target.port))]
        if target.destination.startswith("-"):
            raise BadInput(f"host {target.destination!r} starts with '-'")
        argv += [target.destination, "--", remote_command(remote_argv, env)]
        return argv

    def wrap(self, remote_argv: list[str], deadline: float | None = None,
             stdin_bytes: int = 0) -> list[str]:
        """``remote_argv`` under the remote watchdog (unchanged when ``watchdog`` is off).

        >>> SSH(remote_python="/usr/bin/python3").wrap(["hostname"], 35)
        ['/usr/bin/python3', '-m', 'ncclcheck.remote.watchdog', '--deadline', '35', '--', 'hostname']
        """
        if not self.watchdog:
            return list(remote_argv)
        argv = [self.remote_python, "-m", "ncclcheck.remote.watchdog"]
        if deadline is not None:
            argv += ["--deadline", f"{deadline:g}"]
        if stdin_bytes:
            argv += ["--stdin-bytes", str(stdin_bytes)]
        return argv + ["--"] + [str(a) for a in remote_argv]

    def start(self, target: Target, remote_argv: list[str], env: dict | None = None,
              input: str | bytes | None = None, deadline: float | None = None,
              on_stdout_line: Callable[[str], None] | None = None,
              on_stderr_line: Callable[[str], None] | None = None,
              stream: bool = False) -> RemoteProcess:
        """Start ``remote_argv`` on ``target`` and return at once.

        Args:
            input: bytes for the command's stdin (then closed); without it stdin is /dev/null.
            stream: the command's stdin stays open for what :meth:`RemoteProcess.send` writes
                later, after ``input`` (the watchdog's ``--stdin-bytes -1``).
            deadline: seconds after which the remote watchdog stops the command (exit 124).
            on_stdout_line, on_stderr_line: called from the drain thread for each output line.

        Raises:
            NcclcheckError: the ssh binary could not be started.
        """
        data = input.encode() if isinstance(input, str) else (input or b"")
        argv = self.argv(target, self.wrap(remote_argv, deadline, -1 if stream else len(data)),
                         env)
        process = RemoteProcess(target, argv, data, keep_stdin_open=self.watchdog,
                                on_stdout_line=on_stdout_line, on_stderr_line=on_stderr_line)
        process.program = self.remote_python if self.watchdog else str(remote_argv[0])
        return process

    def run(self, target: Target, remote_argv: list[str], timeout: float,
            env: dict | None = None, input: str | bytes | None = None) -> RemoteResult:
        """Run ``remote_argv`` on ``target`` and wait at most ``timeout`` seconds (+1 s to stop
        ssh). Never raises for the node's failures: they are in ``RemoteResult.error``."""
        started = time.monotonic()
        try:
            process = self.start(target, remote_argv, env, input,
                                 deadline=timeout + REMOTE_DEADLINE_MARGIN)
        except NcclcheckError as exc:
            return RemoteResult(target, None, "", "", False, str(exc),
                                round(time.monotonic() - started, 3))
        try:
            return process.result(timeout)
        finally:
            process.stop()


def run_all(ssh: SSH, targets: list[Target], remote_argv: RemoteArgv, timeout: float,
            concurrency: int = 32, env: dict | None = None,
            input: str | bytes | None = None) -> dict[str, RemoteResult]:
    """Run a command on every target, at most ``concurrency`` at once.

    Args:
        remote_argv: one argv for all nodes, or a function ``target -> argv``.
        timeout: seconds per node.

    Returns:
        ``{target.label: RemoteResult}`` in the targets' order. A node that fails (unreachable,
        timed out, non-zero exit) has its ``error`` set; the other results are kept.
    """
    if concurrency < 1:
        raise BadInput(f"--concurrency must be at least 1, not {concurrency}")
    env = validate_env(env)

    def one(target: Target) -> RemoteResult:
        argv = remote_argv(target) if callable(remote_argv) else remote_argv
        return ssh.run(target, argv, timeout, env=env, input=input)

    results: dict[str, RemoteResult] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(targets))),
                              thread_name_prefix="ncclcheck-ssh")
    try:
        futures = [(t, pool.submit(one, t)) for t in targets]
        for target, future in futures:
            try:
                results[target.label] = future.result()
            except Exception as exc:  # a bug in remote_argv(target): keep the other nodes
                results[target.label] = RemoteResult(target, None, "", "", False,
                                                     f"{target.label}: {exc}")
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_all()
        raise
    pool.shutdown(wait=True)
    return results
