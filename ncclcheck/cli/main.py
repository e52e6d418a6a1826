"""The ``ncclcheck`` command line's root group and entry point (:func:`main`). No logic here.

Each command, with its options, is a module beside this one (``probe.py``, ``bench.py``,
``tune.py``, ``k8s.py``, ``record.py``, ``rank.py``, ``recommend.py``, ``rules.py``,
``diagnose.py``, ``report.py``, ``schema.py``, ``expected.py``); the shared context is
``context.py`` and the option types ``options.py``. Each command's work lives outside this
package (``ncclcheck/probe.py``, ``record.py``, ``bench/``, ``recommend.py``, ``diagnose.py``,
``report/`` ...); rendering lives in ``render/``. Heavy modules are imported inside the command
that needs them, so ``ncclcheck --help`` stays fast and nothing on the probe's path imports torch.
"""

from __future__ import annotations

import errno
import os
import select
import sys

import click

from ncclcheck import __version__
from ncclcheck.cli.bench import bench
from ncclcheck.cli.context import Ctx
from ncclcheck.cli.diagnose import diagnose
from ncclcheck.cli.expected import expected_cmd
from ncclcheck.cli.k8s import k8s
from ncclcheck.cli.options import FullHelpGroup, PipeBroke, show_usage_error
from ncclcheck.cli.probe import probe
from ncclcheck.cli.rank import rank
from ncclcheck.cli.recommend import recommend
from ncclcheck.cli.record import record
from ncclcheck.cli.report import report
from ncclcheck.cli.rules import rules
from ncclcheck.cli.schema import schema_cmd
from ncclcheck.cli.tune import tune
from ncclcheck.errors import NcclcheckError
from ncclcheck.exitcodes import ExitCode
from ncclcheck.textsafe import printable, shorten


@click.group(cls=FullHelpGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="ncclcheck")
# DeepSpeed's launcher (deepspeed/launcher/launch.py) and torch.distributed.launch put
# --local_rank=N (torch >= 2.0: --local-rank=N) between the module and its arguments:
# 'python -m ncclcheck --local_rank=0 bench'. Accepted there and ignored (LOCAL_RANK is read).
@click.option("--local_rank", "--local-rank", "local_rank", hidden=True, metavar="N")
@click.pass_context
def cli(ctx: click.Context, local_rank: str | None) -> None:
    """Make multi-node NCCL training networks work, and run fast.

    \b
    Exit codes: 0 ok, 1 runtime error, 2 usage or bad input,
                3 findings at or above --fail-on.
    """
    if ctx.obj is None:
        ctx.obj = Ctx()


# The commands, each in its own module beside this one (``ncclcheck -h`` lists them sorted).
cli.add_command(probe)
cli.add_command(bench)
cli.add_command(k8s)
cli.add_command(record)
cli.add_command(rank)
cli.add_command(recommend)
cli.add_command(rules)
cli.add_command(diagnose)
cli.add_command(report)
cli.add_command(tune)
cli.add_command(schema_cmd)
cli.add_command(expected_cmd)


def raise_or_report(exc: BaseException) -> None:
    """An internal error: one line and exit 1 (``NCCLCHECK_DEBUG=1``: the traceback)."""
    if os.environ.get("NCCLCHECK_DEBUG"):
        raise exc
    click.echo(f"ncclcheck: internal error: {type(exc).__name__}: {printable(shorten(exc))} "
               "(set NCCLCHECK_DEBUG=1 for the traceback)", err=True)
    sys.exit(ExitCode.ERROR)


def stdout_gone() -> bool:
    """True when standard output is a pipe (or socket) whose reader has closed it."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)     # POLLERR and POLLHUP are always reported
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (AttributeError, ValueError, OSError):
        return False


def main(argv: list[str] | None = None, obj: Ctx | None = None) -> None:
    """Entry point: run the CLI, turn every failure into one line and an exit code."""
    try:  # text that is not valid Unicode (a lone surrogate, argv's \udcff) is written escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        pass
    from ncclcheck.infile import start_command

    start_command()
    try:
        rv = cli.main(args=argv, prog_name="ncclcheck", standalone_mode=False, obj=obj)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        show_usage_error(exc)
        sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) or exc.exit_code == 2
                 else exc.exit_code)
    except click.exceptions.Abort:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except NcclcheckError as exc:
        click.echo(f"ncclcheck: error: {printable(shorten(exc))}", err=True)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except RecursionError:  # only input nested deeper than any document ncclcheck writes
        click.echo("ncclcheck: error: an input is nested too deeply", err=True)
        sys.exit(ExitCode.USAGE)
    except (BrokenPipeError, PipeBroke) as exc:
        if not stdout_gone():                   # a pipe of its own (a worker's): a bug
            raise_or_report(exc.__cause__ or exc)
        # `ncclcheck ... | head`: what is left goes nowhere, and the exit is rich's for the
        # same (its Console.on_broken_pipe): 1, nothing said
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(ExitCode.ERROR)
    except OSError as exc:
        if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP):
            raise_or_report(exc)
        click.echo(f"ncclcheck: error: {printable(shorten(exc))}", err=True)  # a path given
        sys.exit(ExitCode.USAGE)
    except Exception as exc:  # last resort: one line, never a traceback
        raise_or_report(exc)
    sys.exit(rv if isinstance(rv, int) else ExitCode.OK)
