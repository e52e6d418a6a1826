"""What probes may use of a host: the :class:`Host` surface, command results, :class:`Unavailable`
(the other error, :class:`~ncclcheck.errors.QueryFailed`, lives in :mod:`ncclcheck.errors`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["DEFAULT_TIMEOUT_S", "CommandResult", "Host", "Unavailable"]

DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended.

    ``returncode`` is None when the executable was not found or it timed out (``timed_out``).
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.returncode == 0

    def why_failed(self) -> str:
        """A one-line reason, for a probe's ``errors`` list."""
        name = self.argv[0] if self.argv else "?"
        if self.timed_out:
            return f"{name}: timed out"
        if self.returncode is None:
            return f"{name}: not found"
        tail = (self.stderr or self.stdout).strip().splitlines()
        return f"{name}: exit {self.returncode}" + (f": {tail[-1][:200]}" if tail else "")



class Unavailable(Exception):
    """A probe's subsystem is absent on this host (no driver, no /sys/class/infiniband)."""


class Host(Protocol):
    """What probes may use. See :mod:`ncclcheck.host`."""

    root: str
    sources: list[str]

    def read(self, path: str) -> str | None: ...  # noqa: D102
    def listdir(self, path: str) -> list[str]: ...  # noqa: D102
    def exists(self, path: str) -> bool: ...  # noqa: D102
    def isdir(self, path: str) -> bool: ...  # noqa: D102
    def readlink(self, path: str) -> str | None: ...  # noqa: D102
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult: ...  # noqa: D102
    def query(self, name: str, *args: Any) -> Any: ...  # noqa: D102
    def environ(self) -> dict[str, str]: ...  # noqa: D102
