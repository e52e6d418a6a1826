"""Click option types shared by commands (kept out of main.py so that file stays a thin table)."""

from __future__ import annotations

import math
import sys
from typing import Any

import click


class GreedyOption(click.Option):
    """An option that takes every following argument up to the next option, so a shell glob
    works: ``--probe facts/*.json --bench a.json b.json``. Repeating the option adds more.

    The value is a tuple of strings (``multiple=True``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser: Any, ctx: click.Context) -> Any:
        """Wrap the parser's handler of this option so it also eats the following values."""
        result = super().add_to_parser(parser, ctx)
        for name in self.opts:
            opt = parser._long_opt.get(name) or parser._short_opt.get(name)
            if opt is None:
                continue
            original = opt.process

            def process(value: Any, state: Any, original: Any = original,
                        prefixes: Any = opt.prefixes) -> None:
                original(value, state)
                while state.rargs and state.rargs[0][:1] not in prefixes:
                    original(state.rargs.pop(0), state)

            opt.process = process
        return result


class _Ascii:
    """Number types that take ASCII digits only (``int("\u0663")`` is 3 in Python, but a
    port typed as an Arabic-Indic digit is a mistake), and finite values only."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:  # noqa: D102
        if isinstance(value, str) and not value.isascii():
            from ncclcheck.textsafe import shorten

            self.fail(f"{shorten(value)!r} is not a number in ASCII digits", param, ctx)
        out = super().convert(value, param, ctx)  # type: ignore[misc]
        if isinstance(out, float) and not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number", param, ctx)  # type: ignore[attr-defined]
        return out


class IntRange(_Ascii, click.IntRange):
    """:class:`click.IntRange` that takes ASCII digits only."""


class FloatRange(_Ascii, click.FloatRange):
    """:class:`click.FloatRange` that takes ASCII digits and finite values only."""


#: Bounds shared by every command's numeric options.
MAX_TIMEOUT_S = 7 * 86400.0   #: a week: longer is a typo, and beyond time_t on some calls
MAX_ITERS = 1_000_000
MAX_PROCS = 128               #: ranks per node (each CPU rank takes about 0.2 GB)
MAX_NODES = 100_000


def stdout_dash(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``-o`` callback: ``/dev/stdout`` (and its aliases) means ``-``, standard output; any other
    path is checked writable now, before the command's work (see :func:`outfile.check_output`)."""
    from ncclcheck.outfile import check_output, is_stdout

    if value is None or is_stdout(value):
        return None if value is None else "-"
    check_output(value)  # BadInput: one line, exit 2, as when the write itself fails
    return value


def output_checked(ctx: click.Context, param: click.Parameter,
                   value: str | None) -> str | None:
    """A file-only ``-o`` or ``--doc``: checked writable now, before the command's work."""
    from ncclcheck.outfile import check_output

    if value is not None:
        check_output(value)
    return value


def show_usage_error(exc: click.ClickException) -> None:
    """A usage error as click shows it, but with README's ``ncclcheck: error: ...`` last line:

    .. code-block:: text

        Usage: ncclcheck probe [OPTIONS]
        Try 'ncclcheck probe -h' for help.
        ncclcheck: error: No such option: --nope
    """
    from ncclcheck.textsafe import printable, shorten

    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        click.echo(ctx.get_usage(), err=True)
        if ctx.command.get_help_option(ctx) is not None:
            click.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    click.echo(f"ncclcheck: error: {printable(shorten(exc.format_message()))}", err=True)


class EvalCommand(click.Command):
    """A command whose stdout is made for ``eval "$(ncclcheck rank ...)"``: when it fails, its
    stdout gets ``(exit N)`` (N its exit code) after the error line on stderr, so the ``eval``
    returns the command's status instead of eval's 0 for an empty string, and ``bash -e`` stops
    there. Not with ``--json`` (a JSON reader gets nothing) nor when stdout is a terminal."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, list(args), parent=parent, **extra)
        except Exception as exc:
            _exit_for_eval(exc, "--json" in args)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            _exit_for_eval(exc, bool(ctx.params.get("as_json")))
            raise


def _exit_for_eval(exc: BaseException, as_json: bool) -> None:
    import sys

    from ncclcheck.errors import NcclcheckError
    from ncclcheck.exitcodes import ExitCode

    if isinstance(exc, click.exceptions.Exit) or as_json:
        return
    if isinstance(exc, NcclcheckError):
        code = int(exc.code)
    elif isinstance(exc, click.ClickException):
        code = int(ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code)
    else:
        code = int(ExitCode.ERROR)
    try:
        if not sys.stdout.isatty() and code:
            click.echo(f"(exit {code})  # ncclcheck failed: see its error on stderr")
    except (OSError, ValueError):
        pass


class PipeBroke(Exception):
    """A BrokenPipeError from a command, carried past click (its ``main`` turns every EPIPE
    into a silent exit 1, a worker's pipe as well as a closed standard output)."""


class FullHelpGroup(click.Group):
    """A group whose command list gives each command's whole first sentence, wrapped under
    its name, where click cuts it to the terminal's width with '...'; a broken pipe is raised
    as :class:`PipeBroke` for ``main`` to tell a reader gone early from a bug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            rv = super().invoke(ctx)
            sys.stdout.flush()                  # the last of the output, while it is ours
            return rv
        except BrokenPipeError as exc:
            raise PipeBroke() from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=500)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
