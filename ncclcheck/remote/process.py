"""One running remote command: the local ``ssh`` process, its output drained by threads, its
result, and every live one stopped at exit (see :mod:`ncclcheck.remote`)."""

from __future__ import annotations

import atexit
import os
import re
import select
import signal
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from ncclcheck.errors import NcclcheckError
from ncclcheck.hostfile import Target
from ncclcheck.remote.quoting import ssh_failure


#: Seconds a stopped ssh gets between SIGTERM and SIGKILL.
KILL_GRACE = 1.0
#: Output kept per stream; beyond this the rest is dropped and a marker added.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024


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

    def send(self, data: bytes) -> bool:
        """Write ``data`` to ssh's stdin (a session's next request: the remote watchdog passes
        it on with ``--stdin-bytes -1``); False when the pipe is closed or broken."""
        with self._stdin_lock:
            try:
                self._popen.stdin.write(data)
                self._popen.stdin.flush()
                return True
            except (OSError, ValueError):
                return False

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


def stop_together(processes: list[RemoteProcess], wait_s: float) -> None:
    """Close the stdin of each of ``processes`` still running (its node's watchdog then stops
    what it runs, and ssh ends), wait at most ``wait_s`` for all of them together, then stop
    what is left (SIGTERM, then SIGKILL)."""
    live = [p for p in processes if p.poll() is None]
    for process in live:
        process.close_stdin()
    end = time.monotonic() + wait_s
    for process in live:
        process.wait(max(0.0, end - time.monotonic()))
    for process in processes:
        try:
            process.stop()
        except Exception:  # noqa: BLE001 - best effort; keep stopping the others
            pass


def stop_all() -> None:
    """Kill every local ssh this process started that is still running (Ctrl-C, exit)."""
    for process in list(_LIVE):
        try:
            if process.poll() is None:
                process.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(stop_all)
