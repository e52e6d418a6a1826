"""What every command line module shares: the per-invocation consoles (:class:`Ctx`), writing a
document (:func:`emit`), and ``--fail-on`` (:data:`fail_on_option`, :func:`exit_for_findings`).
Used by :mod:`ncclcheck.cli.main` and the per-command modules next to it (``probe.py``,
``bench.py`` ...)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ncclcheck.exitcodes import ExitCode
from ncclcheck.textsafe import safe_console


SEVERITIES = ("info", "warning", "error")


class Ctx:
    """Per-invocation state: the consoles, created in the group callback (tests inject their own)."""

    def __init__(self, out: Any = None, err: Any = None) -> None:
        self._out, self._err = out, err

    @property
    def out(self) -> Any:
        """A rich Console on stdout."""
        if self._out is None:
            self._out = safe_console()
        return self._out

    @property
    def err(self) -> Any:
        """A rich Console on stderr."""
        if self._err is None:
            self._err = safe_console(stderr=True)
        return self._err


def emit(text: str, output: str | None) -> None:
    """Write a document to ``-o FILE`` atomically, or to stdout."""
    if output and output != "-":
        from ncclcheck.outfile import write_atomic

        write_atomic(output, text)
    else:
        click.echo(text, nl=False)


def exit_for_findings(findings: list[dict], fail_on: str | None) -> None:
    """Exit 3 when a finding is at or above ``--fail-on``."""
    if fail_on:
        floor = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(f["severity"]) >= floor for f in findings):
            sys.exit(ExitCode.FINDINGS)


fail_on_option = click.option(
    "--fail-on", type=click.Choice(SEVERITIES), default=None,
    help="Exit 3 when a finding has this severity or worse.")
