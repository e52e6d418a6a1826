"""The ``ncclcheck expected`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.expected.table.select`, render. No logic here."""

from __future__ import annotations

import click


@click.command("expected")
@click.argument("class_ids", nargs=-1, metavar="[CLASS]...")
@click.option("--json", "as_json", is_flag=True, help="Print the table (or the classes) as JSON.")
def expected_cmd(class_ids: tuple[str, ...], as_json: bool) -> None:
    """The table of expected busbw by hardware class: range, what it holds for, sources.

    \b
      ncclcheck expected               # every class with its range and sources
      ncclcheck expected ib-ndr nvlink-h100-8 --json
    """
    from ncclcheck.expected.table import select

    chosen = select(class_ids)
    if as_json:
        import json

        click.echo(json.dumps(chosen, indent=1))
        return
    from ncclcheck.render.expected import render_table

    click.echo(render_table(chosen), nl=False)
