"""The ``ncclcheck diagnose`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.diagnose.diagnose_files`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx, emit, exit_for_findings, fail_on_option
from ncclcheck.cli.options import stdout_dash


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE... | -")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis document as JSON.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the diagnosis JSON to FILE (atomically).")
@fail_on_option
@click.pass_obj
def diagnose(obj: Ctx, files: tuple[str, ...], as_json: bool, output: str | None,
             fail_on: str | None) -> None:
    """Explain NCCL logs (NCCL_DEBUG=INFO/WARN output and tracebacks) from any launcher.

    \b
    Reads plain or gzip files, or - for standard input, streaming:
      torchrun ... 2>&1 | ncclcheck diagnose -
      ncclcheck diagnose node*.log.gz --json -o diagnosis.json
    """
    from ncclcheck.diagnose import diagnose_files
    from ncclcheck.schema import dumps

    doc = diagnose_files(list(files))
    if output and output != "-":
        emit(dumps(doc), output)
    if as_json or output == "-":
        click.echo(dumps(doc), nl=False)
    else:
        from ncclcheck.render.diagnose import render_diagnosis

        render_diagnosis(obj.out if not output else obj.err, doc)
        if output:
            obj.err.print(f"diagnosis written to {output}")
    exit_for_findings(doc["findings"], fail_on)
