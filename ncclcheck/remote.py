"""Run commands on many nodes over the system ``ssh``, with deadlines and nothing left behind.

Each remote command is an argv list. The one string ssh sends to the remote shell is built only
with :func:`shlex.join`, so an argument such as ``$(touch /tmp/pwned)`` arrives verbatim. The ssh
argv is::

    ssh -T -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5
        [-F ssh_config] [-p port] [user@]host -- '<remote command>'

``~/.ssh/config`` is honoured (aliases, ProxyJump, ControlMaster) unless an ``ssh_config`` is given.

Every command runs under :mod:`ncclcheck.watchdog` on the remote node, and the local side keeps
ssh's stdin open for the command's whole life. Closing that pipe, killing the local ssh, losing
the connection, or the launcher dying all reach the watchdog as end of file on its stdin, and it
stops the remote process tree. A remote deadline (the local timeout plus a few seconds) stops it
even when the connection hangs without closing.

Example (a cluster from ``scripts/netns-cluster``)::

    ssh = SSH(ssh_config="/tmp/ncclcheck-netns-nc/ssh_config")
    results = run_all(ssh, load_hostfile(hostfile), ["hostname"], timeout=30)
    for label, result in results.items():
        print(label, result.stdout.strip() if result.ok else result.error)
"""

from __future__ import annotations

import atexit
import math
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Union

from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.hostfile import Target

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+-]*$")
#: Seconds the remote watchdog's deadline adds to the local timeout (local side acts first).
REMOTE_DEADLINE_MARGIN = 5.0
#: Seconds a stopped ssh gets between SIGTERM and SIGKILL.
KILL_GRACE = 1.0
#: Output kept per stream; beyond this the rest is dropped and a marker added.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
_SSH_ERROR_LINE = re.compile(
    r"^(ssh: |kex_exchange_identification|Connection (closed|reset|timed out)|"
    r"Host key verification failed|.*Permission denied|Bad owner or permissions|"
    r"ssh_exchange_identification|.*: No route to host|channel \d+: open failed|"
    r"Could not resolve|Too many authentication failures|.*port \d+: )", re.I)

RemoteArgv = Union[list, Callable[[Target], list]]


def validate_remote_python(path: str) -> str:
    """Return ``path`` if it is an absolute path without shell metacharacters, else BadInput.

    >>> validate_remote_python("/opt/conda/bin/python3")
    '/opt/conda/bin/python3'
    >>> validate_remote_python("python3; reboot")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: --remote-python 'python3; reboot': must be an absolute path of letters, digits and _ . / + -
    """
    if not _SAFE_PATH.match(path) or path.endswith("/"):
        raise BadInput(f"--remote-python {path!r}: must be an absolute path of letters, "
                       "digits and _ . / + -")
    return path


def validate_env(env: dict | None) -> dict[str, str]:
    """Check variable names (``[A-Za-z_][A-Za-z0-9_]*``); values may be anything (quoted later).

    >>> validate_env({"NCCL_DEBUG": "INFO"})
    {'NCCL_DEBUG': 'INFO'}
    >>> validate_env({"A B": "1"})
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: environment variable name 'A B' is not valid
    """
    checked: dict[str, str] = {}
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise BadInput(f"environment variable name {name!r} is not valid")
        checked[name] = str(value)
    return checked


def remote_command(remote_argv: list[str], env: dict | None = None) -> str:
    """The one string the remote shell runs: ``env K=V ... argv`` joined with :func:`shlex.join`.

    >>> print(remote_command(["echo", "$(touch /tmp/pwned)"], {"X": "a b"}))
    env 'X=a b' echo '$(touch /tmp/pwned)'
    """
    argv = [str(a) for a in remote_argv]
    if not argv:
        raise BadInput("empty remote command")
    variables = validate_env(env)
    if variables:
        argv = ["env"] + [f"{k}={v}" for k, v in variables.items()] + argv
    return shlex.join(argv)


def ssh_failure(label: str, stderr: str) -> str:
    """One line saying why ssh itself failed (exit 255), from its stderr.

    >>> ssh_failure("node2", "root@198.18.0.12: Permission denied (publickey).\\r\\n")
    'node2: permission denied (publickey)'
    >>> ssh_failure("node2", "ssh: connect to host 198.18.0.99 port 22: Connection timed out\\n")
    'node2: ssh: connect to host 198.18.0.99 port 22: Connection timed out'
    """
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in lines:
        if "Permission denied" in line:
            return f"{label}: permission denied{line.split('Permission denied', 1)[1].rstrip('.')}"
        if line.startswith("Host key verification failed"):
            return f"{label}: host key verification failed (check known_hosts)"
    for line in lines:
        if _SSH_ERROR_LINE.match(line):
            return f"{label}: {line}"
    return f"{label}: ssh failed (exit 255){': ' + lines[-1] if lines else ''}"


@dataclass
class RemoteResult:
    """What one remote command did.

    Attributes:
        target: the node.
        returncode: the remote command's exit code; None when it never ran to the end (timed
            out, ssh could not start).
        stdout, stderr: its output, decoded as UTF-8 (bad bytes replaced).
        timed_out: True when the local timeout or the remote deadline stopped it.
        error: None on success, else one line: ``"node2: timed out after 30 s"``,
            ``"node2: permission denied (publickey)"``, ``"node2: exited with code 3: <last
            stderr line>"``.
        duration_s: seconds from start to end.
    """

    target: Target
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.returncode == 0 and not self.timed_out and self.error is None


class OutputBuffer:
    """A stream drained by a thread into memory, so the remote side never blocks on a pipe."""

    def __init__(self, on_line: Callable[[str], None] | None = None) -> None:
        self._data = bytearray()
        self._cond = threading.Condition()
        self._closed = False
        self._dropped = 0
        self._on_line = on_line
        self._partial = b""

    def _append(self, chunk: bytes) -> None:
        with self._cond:
            room = MAX_OUTPUT_BYTES - len(self._data)
            self._data += chunk[:max(room, 0)]
            self._dropped += max(len(chunk) - max(room, 0), 0)
            self._cond.notify_all()
        if self._on_line:
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            for line in lines:
                self._on_line(line.decode("utf-8", "replace"))

    def _close(self) -> None:
        if self._on_line and self._partial:
            self._on_line(self._partial.decode("utf-8", "replace"))
            self._partial = b""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """True once the stream reached end of file (or was abandoned)."""
        return self._closed

    def text(self) -> str:
        """Everything read so far."""
        with self._cond:
            text = self._data.decode("utf-8", "replace")
        if self._dropped:
            text += f"\n[ncclcheck: {self._dropped} more bytes dropped]\n"
        return text

    def __str__(self) -> str:
        return self.text()

    def wait_for(self, pattern: str, timeout: float) -> re.Match | None:
        """Wait until the text matches the regex ``pattern``; None on timeout or end of stream."""
        regex = re.compile(pattern, re.M)
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                match = regex.search(self._data.decode("utf-8", "replace"))
                left = end - time.monotonic()
                if match or self._closed or left <= 0:
                    return match
                self._cond.wait(left)


def _drain(fd: int, buffer: OutputBuffer, exited: threading.Event) -> None:
    """Read ``fd`` into ``buffer`` until EOF; give up 0.5 s after the process exited.

    The give-up covers a ControlPersist master or ProxyCommand that inherited the pipe and keeps
    it open after ssh itself is gone.
    """
    quiet_since = None
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buffer._append(chunk)
                quiet_since = None
            elif exited.is_set():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.5:
                    break
    except (OSError, ValueError):
        pass
    finally:
        buffer._close()
        try:
            os.close(fd)
        except OSError:
            pass


_LIVE: "weakref.WeakSet[RemoteProcess]" = weakref.WeakSet()


class RemoteProcess:
    """One running remote command (the local ``ssh`` process and its drained output).

    Attributes:
        target: the node.
        stdout, stderr: :class:`OutputBuffer` objects (``.text()``, ``.wait_for(regex, s)``).
        argv: the local ssh argv.
    """

    def __init__(self, target: Target, argv: list[str], input_bytes: bytes = b"",
                 keep_stdin_open: bool = True,
                 on_stdout_line: Callable[[str], None] | None = None,
                 on_stderr_line: Callable[[str], None] | None = None) -> None:
        self.target, self.argv = target, argv
        self.stdout = OutputBuffer(on_stdout_line)
        self.stderr = OutputBuffer(on_stderr_line)
        self.started = time.monotonic()
        self.timed_out = False
        self.program: str | None = None  # the remote program, named when it is missing
        self._exited = threading.Event()
        try:
            self._popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise NcclcheckError(f"{target.label}: cannot run {argv[0]}: "
                                 f"{exc.strerror or exc}") from None
        _LIVE.add(self)
        self._threads = []
        for pipe, buffer in ((self._popen.stdout, self.stdout), (self._popen.stderr, self.stderr)):
            fd = os.dup(pipe.fileno())
            pipe.close()
            thread = threading.Thread(target=_drain, args=(fd, buffer, self._exited), daemon=True)
            thread.start()
            self._threads.append(thread)
        self._stdin_lock = threading.Lock()
        threading.Thread(target=self._feed, args=(input_bytes, keep_stdin_open),
                         daemon=True).start()

    def _feed(self, data: bytes, keep_open: bool) -> None:
        stdin = self._popen.stdin
        try:
            if data:
                stdin.write(data)
                stdin.flush()
        except (OSError, ValueError):
            pass
        if not keep_open:
            self.close_stdin()

    @property
    def pid(self) -> int:
        """The local ssh process id."""
        return self._popen.pid

    def close_stdin(self) -> None:
        """Close ssh's stdin: the remote watchdog then stops the remote process tree."""
        with self._stdin_lock:
            try:
                self._popen.stdin.close()
            except (OSError, ValueError):
                pass

    def poll(self) -> int | None:
        """ssh's exit code (the remote command's, or 255 for ssh errors), None while running."""
        rc = self._popen.poll()
        if rc is not None:
            self._exited.set()
        return rc

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds; the exit code, or None if still running."""
        try:
            rc = self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._exited.set()
        return rc

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self._popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self) -> None:
        """Ask the remote command to stop (close stdin, SIGTERM the local ssh); do not wait."""
        self.close_stdin()
        if self._popen.poll() is None:
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the local ssh and what is left of its process group (a ProxyCommand), even
        after ssh exited; the remote side sees the connection drop and its watchdog stops the
        remote tree."""
        self.close_stdin()
        self._signal(signal.SIGKILL)

    def stop(self, grace: float = KILL_GRACE) -> int | None:
        """terminate(), wait ``grace`` seconds, kill(), and reap; the exit code or None."""
        if self.poll() is None:
            self.terminate()
            if self.wait(grace) is None:
                self.kill()
                self.wait(2.0)
        self._exited.set()
        return self._popen.returncode

    def result(self, timeout: float | None = None) -> RemoteResult:
        """Wait up to ``timeout`` seconds, stop the command if it is still running, and report."""
        rc = self.wait(timeout)
        if rc is None:
            self.timed_out = True
            self.stop()
        self._exited.set()
        for thread in self._threads:
            thread.join(1.0)
        return self._make_result(None if self.timed_out else rc, timeout)

    def _make_result(self, rc: int | None, timeout: float | None) -> RemoteResult:
        stdout, stderr = self.stdout.text(), self.stderr.text()
        label = self.target.label
        error = None
        timed_out = self.timed_out
        if timed_out:
            error = f"{label}: timed out after {timeout:g} s"
        elif rc == 255:
            error = ssh_failure(label, stderr)
        elif rc == 124 and "ncclcheck-watchdog: deadline" in stderr:
            timed_out = True
            error = f"{label}: timed out (remote deadline)"
        elif rc == 127 and self.program and self.program in stderr \
                and "ncclcheck-watchdog" not in stderr:
            error = f"{label}: {self.program} not found on the remote node (set --remote-python)"
        elif rc not in (0, None) and re.search(r"No module named '?ncclcheck", stderr):
            error = f"{label}: ncclcheck is not installed for the remote python " \
                    "(set --remote-python)"
        elif rc != 0:
            last = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
            error = f"{label}: exited with code {rc}" + (f": {last[-1]}" if last else "")
        return RemoteResult(self.target, rc, stdout, stderr, timed_out, error,
                            round(time.monotonic() - self.started, 3))


class SSH:
    """Builds and runs ssh commands for :class:`~ncclcheck.hostfile.Target` nodes.

    Args:
        ssh_config: an ssh_config file passed as ``-F`` (None: ssh's own, ``~/.ssh/config``).
        connect_timeout: seconds for ssh's TCP connect (``ConnectTimeout``, rounded up).
        remote_python: the python that runs ``ncclcheck.watchdog`` remotely; default this
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
        ['/usr/bin/python3', '-m', 'ncclcheck.watchdog', '--deadline', '35', '--', 'hostname']
        """
        if not self.watchdog:
            return list(remote_argv)
        argv = [self.remote_python, "-m", "ncclcheck.watchdog"]
        if deadline is not None:
            argv += ["--deadline", f"{deadline:g}"]
        if stdin_bytes:
            argv += ["--stdin-bytes", str(stdin_bytes)]
        return argv + ["--"] + [str(a) for a in remote_argv]

    def start(self, target: Target, remote_argv: list[str], env: dict | None = None,
              input: str | bytes | None = None, deadline: float | None = None,
              on_stdout_line: Callable[[str], None] | None = None,
              on_stderr_line: Callable[[str], None] | None = None) -> RemoteProcess:
        """Start ``remote_argv`` on ``target`` and return at once.

        Args:
            input: bytes for the command's stdin (then closed); without it stdin is /dev/null.
            deadline: seconds after which the remote watchdog stops the command (exit 124).
            on_stdout_line, on_stderr_line: called from the drain thread for each output line.

        Raises:
            NcclcheckError: the ssh binary could not be started.
        """
        data = input.encode() if isinstance(input, str) else (input or b"")
        argv = self.argv(target, self.wrap(remote_argv, deadline, len(data)), env)
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


def stop_all() -> None:
    """Kill every local ssh this process started that is still running (Ctrl-C, exit)."""
    for process in list(_LIVE):
        try:
            if process.poll() is None:
                process.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(stop_all)
