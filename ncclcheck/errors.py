"""Errors that reach the user as one clear line, with an exit code."""

from __future__ import annotations

from ncclcheck.exitcodes import ExitCode


class NcclcheckError(Exception):
    """A failure the CLI reports as ``ncclcheck: error: <message>`` and exits with ``code``."""

    code = ExitCode.ERROR

    def __init__(self, message: str, code: ExitCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class BadInput(NcclcheckError):
    """The user gave a file, flag value or document we cannot use (exit 2)."""

    code = ExitCode.USAGE


class QueryFailed(Exception):
    """A native query could not answer (library missing, call failed)."""
