"""The ``ncclcheck report`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.report.page.make_report`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx, emit
from ncclcheck.cli.options import stdout_dash
from ncclcheck.textsafe import printable_lines


@click.command()
@click.argument("documents", nargs=-1, required=True, metavar="DOC...")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the report to FILE (atomically) instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="html (one self-contained page) or md (Markdown for an issue). "
                   "Default: md when FILE ends in .md, else html.")
@click.option("--title", metavar="TEXT", help="The page title (default: names the nodes).")
@click.pass_obj
def report(obj: Ctx, documents: tuple[str, ...], output: str | None, fmt: str | None,
           title: str | None) -> None:
    """Render facts, cluster, bench, recommendation and diagnosis documents as one page.

    \b
    ncclcheck report facts-*.json bench.json nccl-rec.json -o report.html
    ncclcheck report facts-*.json diagnosis.json --format md > report.md
    """
    from ncclcheck.report.page import format_for, make_report

    emit(printable_lines(make_report(documents, format_for(output, fmt), title)), output)
    if output and output != "-":
        obj.err.print(f"report written to {output}", markup=False, highlight=False)
