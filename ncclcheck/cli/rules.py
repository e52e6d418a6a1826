"""The ``ncclcheck rules`` command (registered on the root group in ``main.py``): parse,
call the registry :data:`ncclcheck.rules.ALL_RULES`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx


@click.command()
@click.option("--explain", is_flag=True, help="Also print each rule's why, fix and citation.")
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@click.pass_obj
def rules(obj: Ctx, explain: bool, as_json: bool) -> None:
    """List the rules recommend and probe run: id, scope, severity, what they read and set."""
    from ncclcheck.rules import ALL_RULES

    if as_json:
        import json

        keys = ("id", "title", "severity", "scope", "reads", "sets", "why", "docs", "fix")
        click.echo(json.dumps([{k: getattr(r, k).value if k == "severity" else getattr(r, k)
                                for k in keys} for r in ALL_RULES], indent=2))
        return
    from ncclcheck.render.recommend import render_rules

    render_rules(obj.out, list(ALL_RULES), explain)
