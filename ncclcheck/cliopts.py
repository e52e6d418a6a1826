"""Click option types shared by commands (kept out of cli.py so that file stays a thin table)."""

from __future__ import annotations

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


def stdout_dash(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``-o`` callback: ``/dev/stdout`` (and its aliases) means ``-``, standard output."""
    from ncclcheck.outfile import is_stdout

    return "-" if is_stdout(value) else value


def show_usage_error(exc: click.ClickException) -> None:
    """A usage error as click shows it, but with README's ``ncclcheck: error: ...`` last line:

    .. code-block:: text

        Usage: ncclcheck probe [OPTIONS]
        Try 'ncclcheck probe -h' for help.
        ncclcheck: error: No such option: --nope
    """
    from ncclcheck.textsafe import printable

    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        click.echo(ctx.get_usage(), err=True)
        if ctx.command.get_help_option(ctx) is not None:
            click.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)
    click.echo(f"ncclcheck: error: {printable(exc.format_message())}", err=True)


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


class FullHelpGroup(click.Group):
    """A group whose command list gives each command's whole first sentence, wrapped under
    its name, where click cuts it to the terminal's width with '...'."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=500)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
