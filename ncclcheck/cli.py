"""The ``ncclcheck`` command line: parse options, call one function, render. No logic here.

Each command's work lives in its own module (``probe.py``, ``record.py``, ``bench/``,
``recommend.py``, ``diagnose.py``, ``report.py``); rendering lives in ``render/``. Heavy modules
are imported inside the command that needs them, so ``ncclcheck --help`` stays fast and nothing on
the probe's path imports torch.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ncclcheck import __version__
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.exitcodes import ExitCode

SEVERITIES = ("info", "warning", "error")


class Ctx:
    """Per-invocation state: the consoles, created in the group callback (tests inject their own)."""

    def __init__(self, out: Any = None, err: Any = None) -> None:
        self._out, self._err = out, err

    @property
    def out(self) -> Any:
        """A rich Console on stdout."""
        if self._out is None:
            from rich.console import Console

            self._out = Console()
        return self._out

    @property
    def err(self) -> Any:
        """A rich Console on stderr."""
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True)
        return self._err


def emit(text: str, output: str | None) -> None:
    """Write a document to ``-o FILE`` atomically, or to stdout."""
    if output and output != "-":
        from ncclcheck.schema import write_atomic

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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="ncclcheck")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Make multi-node NCCL training networks work, and run fast.

    \b
    Exit codes: 0 ok, 1 runtime error, 2 usage or bad input,
                3 findings at or above --fail-on.
    """
    if ctx.obj is None:
        ctx.obj = Ctx()


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts document as JSON.")
@click.option("-o", "--output", metavar="FILE", help="Write the facts JSON to FILE (atomically).")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Read files under PATH (a mounted host tree, an unpacked sos report).")
@click.option("--replay", metavar="DIR", help="Probe a recorded host folder instead of this machine.")
@click.option("--only", metavar="SECTIONS", help="Comma-separated sections to collect.")
@fail_on_option
@click.pass_obj
def probe(obj: Ctx, as_json: bool, output: str | None, root: str, replay: str | None,
          only: str | None, fail_on: str | None) -> None:
    """Collect facts about this node: GPUs, NCCL libraries, network, IB/RoCE, limits, env."""
    from ncclcheck import probe as probe_mod
    from ncclcheck.host import LiveHost, RecordedHost
    from ncclcheck.schema import dumps

    if replay:
        try:
            host: Any = RecordedHost(replay)
        except FileNotFoundError as exc:
            raise BadInput(str(exc)) from None
    else:
        if not os.path.isdir(root):
            raise BadInput(f"--root {root}: not a directory")
        host = LiveHost(root)
    doc = probe_mod.collect_facts(host, only.split(",") if only else None)
    if output:
        emit(dumps(doc), output)
    if as_json:
        click.echo(dumps(doc), nl=False)
    elif not output or output == "-":
        from ncclcheck.render.facts import render_facts

        render_facts(obj.out, doc)
    else:
        from ncclcheck.render.facts import render_findings

        render_findings(obj.err, doc.get("findings", []))
        obj.err.print(f"facts written to {output}", markup=False, highlight=False)
    exit_for_findings(doc.get("findings", []), fail_on)


@cli.command()
@click.argument("folder", metavar="DIR")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Record files under PATH instead of /.")
@click.option("--scrub/--no-scrub", default=True, show_default=True,
              help="Replace hostnames, addresses, MACs, GUIDs, UUIDs and serials consistently.")
@click.pass_obj
def record(obj: Ctx, folder: str, root: str, scrub: bool) -> None:
    """Record what the probe reads on this node into DIR, to replay or attach to a bug report."""
    from ncclcheck.record import record_host

    path = record_host(folder, root=root, scrub=scrub)
    obj.err.print(f"recorded to {path} (replay: ncclcheck probe --replay {path})",
                  markup=False, highlight=False)


# --- rank command (rank.py) -----------------------------------------------------------------
# --- end rank ---


# --- bench command (bench/) -------------------------------------------------------
# --- end bench ---


# --- recommend and rules commands (recommend.py) --------------------------------------------
# --- end recommend ---


# --- diagnose command (diagnose.py) ---------------------------------------------------------
# --- end diagnose ---


# --- report command (report.py) -------------------------------------------------------------
# --- end report ---


def main(argv: list[str] | None = None, obj: Ctx | None = None) -> None:
    """Entry point: run the CLI, turn every failure into one line and an exit code."""
    try:
        rv = cli.main(args=argv, prog_name="ncclcheck", standalone_mode=False, obj=obj)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) or exc.exit_code == 2
                 else exc.exit_code)
    except click.exceptions.Abort:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except NcclcheckError as exc:
        click.echo(f"ncclcheck: error: {exc}", err=True)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(ExitCode.OK)
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get("NCCLCHECK_DEBUG"):
            raise
        click.echo(f"ncclcheck: internal error: {type(exc).__name__}: {exc} "
                   "(set NCCLCHECK_DEBUG=1 for the traceback)", err=True)
        sys.exit(ExitCode.ERROR)
    sys.exit(rv if isinstance(rv, int) else ExitCode.OK)
