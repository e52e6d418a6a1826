"""The ``ncclcheck record`` command (registered on the root group in ``main.py``): parse,
call :func:`ncclcheck.record.record_host`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx


@click.command()
@click.argument("folder", metavar="DIR")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Record files under PATH instead of /.")
@click.option("--scrub/--no-scrub", default=True, show_default=True,
              help="Replace hostnames, IP addresses (also in /proc/net hex), MACs, IB GUIDs, "
                   "UUIDs, container ids, serials and the /home user name, consistently.")
@click.pass_obj
def record(obj: Ctx, folder: str, root: str, scrub: bool) -> None:
    """Record what the probe reads on this node into DIR, to replay or attach to a bug report."""
    from ncclcheck.record import record_host

    path = record_host(folder, root=root, scrub=scrub)
    obj.err.print(f"recorded to {path} (replay: ncclcheck probe --replay {path})",
                  markup=False, highlight=False)
