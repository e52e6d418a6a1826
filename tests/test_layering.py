"""Heavy imports stay at the edge: nothing on the probe/recommend/diagnose path imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["probe", "--json"], ["--help"], ["probe", "--help"]])
def test_cli_paths_do_not_import_torch(args):
    code = ("import sys, runpy\n"
            "sys.argv = ['ncclcheck', *%r]\n"
            "try:\n"
            "    runpy.run_module('ncclcheck', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
            "sys.stderr.write('LOADED:' + ','.join(bad))\n" % (args,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.rsplit("LOADED:", 1)[-1] == "", out.stderr[-500:]


def test_help_does_not_import_rich_or_probes():
    code = ("import sys\nfrom ncclcheck import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('MODS:' + ','.join(m for m in ('rich', 'ncclcheck.probes', 'psutil', 'pynvml', 'jinja2')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.rsplit("MODS:", 1)[-1].strip() == ""
