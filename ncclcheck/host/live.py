"""The live host: files under a root on this machine, real commands, native queries."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from ncclcheck.host.envfilter import filter_environ
from ncclcheck.host.protocol import DEFAULT_TIMEOUT_S, CommandResult
from ncclcheck.rootpaths import follow_links, read_regular, rel


class LiveHost:
    """Reads files under ``root`` and runs real commands with timeouts."""

    def __init__(self, root: str = "/", env: dict[str, str] | None = None) -> None:
        self.root = os.path.abspath(root)
        self.sources: list[str] = []
        self._env = os.environ if env is None else env
        # Under "/" the kernel resolves links; under any other root we do, so that they stay in it.
        self._chroot = self.root != "/"

    # -- files ---------------------------------------------------------------------------------
    def _path(self, path: str, follow_last: bool = True) -> str | None:
        """The real path of a machine path under the root; None when it would leave the root."""
        try:
            relpath = rel(path)
        except ValueError:
            return None
        if not self._chroot:
            return os.path.join(self.root, relpath)
        return self._resolve(relpath, follow_last)

    def _resolve(self, relpath: str, follow_last: bool) -> str | None:
        """Follow symbolic links without leaving the root (see :func:`follow_links`)."""
        def readlink(link: str) -> str | None:
            here = os.path.join(self.root, link)
            return os.readlink(here) if os.path.islink(here) else None

        try:
            inside = follow_links(relpath, readlink, follow_last)
        except OSError:
            return None
        return None if inside is None else os.path.join(self.root, inside)

    def _touch(self, what: str) -> None:
        self.sources.append(what)

    def read(self, path: str) -> str | None:
        """Text of a regular file under the root, or None when missing or unreadable."""
        real = self._path(path)
        self._touch("/" + rel(path) if real else path)
        return read_regular(real) if real is not None else None

    def listdir(self, path: str) -> list[str]:
        """Sorted names in a directory under the root; [] when missing."""
        real = self._path(path)
        if real is None:
            return []
        try:
            return sorted(os.listdir(real))
        except OSError:
            return []

    def exists(self, path: str) -> bool:
        """Whether a path exists under the root (a dangling link does not)."""
        real = self._path(path)
        return bool(real) and os.path.exists(real)

    def isdir(self, path: str) -> bool:
        """Whether a path is a directory under the root."""
        real = self._path(path)
        return bool(real) and os.path.isdir(real)

    def readlink(self, path: str) -> str | None:
        """The target of a symbolic link, as stored; None when it is not a link."""
        real = self._path(path, follow_last=False)
        if real is None:
            return None
        try:
            return os.readlink(real)
        except OSError:
            return None

    # -- commands and native queries -----------------------------------------------------------
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        """Run ``argv`` (no shell) with a timeout; never raises."""
        argv = [str(a) for a in argv]
        self._touch("$ " + " ".join(argv))
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except FileNotFoundError:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: not found")
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode("utf-8", "replace")
            return CommandResult(tuple(argv), None, out, f"timed out after {timeout:g}s", True)
        except OSError as exc:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: {exc.strerror or exc}")
        return CommandResult(tuple(argv), proc.returncode,
                             proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"))

    def query(self, name: str, *args: Any) -> Any:
        """Call the native query ``name`` (see :mod:`ncclcheck.native`); raises QueryFailed."""
        from ncclcheck import native

        self._touch(f"query {name}")
        return native.call(self, name, *args)

    def environ(self) -> dict[str, str]:
        """The allow-listed environment of this process."""
        return filter_environ(dict(self._env))
