"""The ``ncclcheck schema`` command (registered on the root group in ``main.py``): parse,
call :mod:`ncclcheck.validate`, render. No logic here."""

from __future__ import annotations

import click


@click.command("schema")
@click.argument("name", required=False, metavar="[NAME]")
def schema_cmd(name: str | None) -> None:
    """Print the JSON Schema of a document (facts, cluster, bench, pairwise, diagnosis,
    recommendation, tune).

    \b
      ncclcheck schema                 # the names
      ncclcheck schema facts > facts.schema.json
    """
    import json

    from ncclcheck import validate

    if not name:
        click.echo("\n".join(validate.KINDS))
        return
    click.echo(json.dumps(validate.definition(name.removeprefix("ncclcheck/")), indent=1,
                          sort_keys=True))
