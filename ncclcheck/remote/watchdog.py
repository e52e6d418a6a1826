"""Remote-side supervisor: no process outlives the ssh connection that started it.

``ncclcheck.remote`` runs every remote command as::

    <remote python> -m ncclcheck.remote.watchdog --deadline 35 [--stdin-bytes N] -- <argv...>

The watchdog starts ``argv`` in a new session (its own process group), lets it write straight to
the watchdog's stdout and stderr (the ssh channel), and stops the whole tree -- SIGTERM, then
SIGKILL two seconds later -- when:

* its stdin reaches end of file: the launcher closed the pipe, the local ``ssh`` died, or the
  connection dropped (ssh without a tty never signals the remote side, so this is the only sign);
* the deadline passes (exit code 124, as coreutils ``timeout``);
* it gets SIGTERM, SIGHUP or SIGINT.

It registers as a child subreaper, so processes that leave the group (``setsid``, double forks)
are re-parented to it and stopped too. The first ``--stdin-bytes`` bytes of stdin are passed to
the child's stdin, which is then closed; ``--stdin-bytes -1`` passes all of it as it comes (a
session's requests, :class:`ncclcheck.bench.session.Session`); without it the child's stdin is
``/dev/null``. The exit code is the child's (128+N when signal N ended it).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time

DEADLINE_EXIT = 124
PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def exit_code(status: int) -> int:
    """A shell-style exit code from a ``waitpid`` status: the code, or 128+signal.

    >>> exit_code(3 << 8), exit_code(signal.SIGKILL)
    (3, 137)
    """
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def become_subreaper() -> bool:
    """Ask Linux to re-parent orphaned descendants to this process (prctl); False if refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants() -> list[int]:
    """Process ids of every descendant of this process, from /proc (empty when unreadable)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Supervisor:
    """Runs one child and stops its whole tree on EOF, deadline or signal."""

    def __init__(self, argv: list[str], deadline: float | None, stdin_bytes: int,
                 grace: float, watch_stdin: bool) -> None:
        self.argv, self.deadline, self.grace = argv, deadline, grace
        self.stdin_bytes, self.watch_stdin = stdin_bytes, watch_stdin
        self.wake = threading.Event()
        self.reason: str | None = None
        self.signal_number: int | None = None
        self.child_status: int | None = None
        self.child: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _stop(self, reason: str) -> None:
        with self.lock:
            if self.reason is None:
                self.reason = reason
        self.wake.set()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signal_number = signum
        self._stop("signal")

    def _read_stdin(self) -> None:
        """Hand the first ``stdin_bytes`` to the feeder, then wait for end of file.

        Writing to the child happens in another thread, so a child that does not read its
        input cannot delay noticing end of file.
        """
        left = self.stdin_bytes if self.stdin_bytes >= 0 else -1        # -1: all of it
        chunks: "queue.Queue[bytes | None]" = queue.Queue()
        if self.child is not None and self.child.stdin is not None:
            threading.Thread(target=self._feed, args=(chunks, self.child.stdin),
                             daemon=True).start()
        while True:
            try:
                chunk = os.read(0, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if left < 0:
                chunks.put(chunk)
            elif left > 0:
                chunks.put(chunk[:left])
                left -= len(chunk[:left])
                if left == 0:
                    chunks.put(None)
        chunks.put(None)
        self._stop("eof")

    @staticmethod
    def _feed(chunks: "queue.Queue[bytes | None]", sink) -> None:
        """Write queued input to the child's stdin; close it at the end."""
        try:
            while True:
                chunk = chunks.get()
                if chunk is None:
                    break
                sink.write(chunk)
                sink.flush()
        except (OSError, ValueError):
            pass
        finally:
            try:
                sink.close()
            except OSError:
                pass

    def _reap(self) -> None:
        """Reap the child and any re-parented orphans; note the child's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                if self.child_status is not None:
                    return
                time.sleep(0.05)
                continue
            except InterruptedError:
                continue
            if self.child is not None and pid == self.child.pid:
                self.child.returncode = exit_code(status)  # keeps Popen from waiting again
                self.child_status = status
                self.wake.set()

    def _signal_tree(self, signum: int) -> bool:
        """Send ``signum`` to the child's group and every descendant; True if any was alive."""
        alive = False
        if self.child is not None:
            try:
                os.killpg(self.child.pid, signum)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        for pid in descendants():
            try:
                os.kill(pid, signum)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        return alive

    def _stop_tree(self) -> None:
        if not self._signal_tree(signal.SIGTERM):
            return
        end = time.monotonic() + self.grace
        while time.monotonic() < end:
            time.sleep(0.05)
            if self.child_status is not None and not descendants() and not self._group_alive():
                return
        self._signal_tree(signal.SIGKILL)
        end = time.monotonic() + 2
        while self.child_status is None and time.monotonic() < end:
            time.sleep(0.02)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.child.pid, 0)  # type: ignore[union-attr]
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _say(self, message: str) -> None:
        try:
            sys.stderr.write(f"ncclcheck-watchdog: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def run(self) -> int:
        """Start the child, supervise it, return the exit code."""
        for signum in _STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        become_subreaper()
        try:
            self.child = subprocess.Popen(
                self.argv, start_new_session=True,
                stdin=subprocess.PIPE if self.stdin_bytes else subprocess.DEVNULL)
        except OSError as exc:
            self._say(f"cannot run {self.argv[0]}: {exc.strerror or exc}")
            return 127
        threading.Thread(target=self._reap, daemon=True).start()
        if self.watch_stdin:
            threading.Thread(target=self._read_stdin, daemon=True).start()
        end = None if self.deadline is None else time.monotonic() + self.deadline
        while self.child_status is None and self.reason is None:
            remaining = None if end is None else end - time.monotonic()
            if remaining is not None and remaining <= 0:
                self._stop("deadline")
                break
            self.wake.wait(remaining)
            self.wake.clear()
        self._stop_tree()
        # The child may have exited on its own just as stdin closed: give the reaper thread a
        # moment to record its status, so a clean exit is not reported as killed.
        settle = time.monotonic() + max(self.grace, 1.0)
        while self.child_status is None and time.monotonic() < settle:
            time.sleep(0.02)
        if self.reason == "deadline":
            self._say(f"deadline of {self.deadline:g} s passed; stopped {self.argv[0]}")
            return DEADLINE_EXIT
        if self.reason == "signal" and self.child_status is None:
            return 128 + (self.signal_number or signal.SIGTERM)
        if self.reason == "eof" and self.child_status is None:
            return 128 + signal.SIGHUP
        return exit_code(self.child_status) if self.child_status is not None else 1


def build_parser() -> argparse.ArgumentParser:
    """The watchdog's options (everything after ``--`` is the command)."""
    parser = argparse.ArgumentParser(
        prog="python -m ncclcheck.remote.watchdog",
        description="Run a command; stop its whole process tree on stdin EOF, deadline or signal.")
    parser.add_argument("--deadline", type=float, metavar="S",
                        help="Stop the command after S seconds (exit 124).")
    parser.add_argument("--stdin-bytes", type=int, default=0, metavar="N",
                        help="Pass the first N bytes of stdin to the command (-1: all of "
                             "it, as it comes).")
    parser.add_argument("--grace", type=float, default=2.0, metavar="S",
                        help="Seconds between SIGTERM and SIGKILL (default 2).")
    parser.add_argument("--no-stdin-watch", action="store_true",
                        help="Do not stop the command when stdin ends (for manual runs).")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``[options] -- command...`` and supervise the command."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        build_parser().error("expected -- before the command")
    split = args.index("--")
    opts, command = build_parser().parse_args(args[:split]), args[split + 1:]
    if not command:
        build_parser().error("no command after --")
    if opts.deadline is not None and opts.deadline <= 0:
        build_parser().error("--deadline must be positive")
    return Supervisor(command, opts.deadline, max(-1, opts.stdin_bytes), opts.grace,
                      not opts.no_stdin_watch).run()


if __name__ == "__main__":
    sys.exit(main())
