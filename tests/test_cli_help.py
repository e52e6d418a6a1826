"""Every command's ``--help`` reproduces its golden text byte for byte (issue 29: moving the
command line into a package changes no help text).

The commands are found by walking the click group, so a new command or subcommand without a
golden file fails. The width is the one a user gets in a terminal 100 columns wide or wider
(``COLUMNS=100 ncclcheck bench --help``): click wraps at the group's ``max_content_width``
(100) less 2. Refresh after a deliberate change:
``python3 -m pytest tests/test_cli_help.py --update-golden``, then read the diff.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ncclcheck.cli.main import cli

GOLDEN = Path(__file__).parent / "fixtures" / "cli-help"
WIDTH = 100 - 2  #: click.formatting.HelpFormatter: min(COLUMNS, max_content_width) - 2


def command_paths(group: click.Command = cli, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under the root group, the root (``()``) first."""
    found = [path]
    if isinstance(group, click.Group):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            found += command_paths(group.get_command(ctx, name), path + (name,))
    return found


def golden_name(path: tuple[str, ...]) -> str:
    return "-".join(("ncclcheck",) + path) + ".txt"


PATHS = command_paths()


def test_the_walk_finds_subcommands():
    assert ("k8s", "render") in PATHS and ("k8s", "label") in PATHS and PATHS[0] == ()


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "ncclcheck")
def test_help_is_unchanged(path, update_golden):
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="ncclcheck",
                                terminal_width=WIDTH, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    golden = GOLDEN / golden_name(path)
    if update_golden or not golden.exists():
        golden.parent.mkdir(exist_ok=True)
        golden.write_bytes(result.stdout_bytes)
        if not update_golden:
            pytest.fail(f"{golden} was missing and has been written; check it in")
    assert result.stdout_bytes.decode() == golden.read_text()


def test_no_golden_file_without_its_command():
    stale = sorted({p.name for p in GOLDEN.glob("*.txt")} - {golden_name(p) for p in PATHS})
    assert not stale, f"golden help of commands that are gone: {stale}"
