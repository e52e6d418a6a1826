"""tune on a 2-node namespace cluster with a slow second NIC (eth0 at 400 Mbit/s, the hostfile's
network; eth1 at 100 Mbit/s; the veths report one speed, so the rules list both): gloo's
baseline runs on eth0, so nothing beats it, and before issue 27 tune kept the rules'
``=eth0,eth1`` and labelled it WINNER while ``=eth1`` alone measured a quarter of it. Now the
slow member leaves the list, nothing is labelled a winner, and the one-command path writes
what the three-step manual recipe writes (``=eth0``).

Both paths are README's own lines, read from README.md and run as they stand there (tune at its
defaults; the recipe's ``bench --compare`` at the sizes tune measures), with only the hostfile's
path and the cluster's ``--ssh-config`` filled in."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster  # noqa: F401  (module-scoped fixture)

from ncclcheck.envformat import parse_env_text

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]
REPO = Path(__file__).resolve().parent.parent.parent


def readme_line(start: str) -> list[str]:
    """The argv of README's first command line that starts with ``start`` (its comment cut)."""
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith(start):
            return shlex.split(line, comments=True)
    raise AssertionError(f"README.md has no line starting {start!r}")


def run_readme(c, tmp_path, start: str, timeout=600) -> str:
    """README's line in ``tmp_path`` as its working folder: ``hosts`` is the cluster's hostfile,
    the cluster's ssh config is added, ``cand/*.env`` is globbed and ``> FILE`` is written."""
    argv = readme_line(start)
    assert argv[0] == "ncclcheck"
    redirect = None
    if ">" in argv:
        k = argv.index(">")
        argv, redirect = argv[:k], argv[k + 1]
    args: list[str] = []
    for a in argv[1:]:
        args += sorted(str(p) for p in tmp_path.glob(a)) if "*" in a else [a]
    if "--hostfile" in args:
        args[args.index("--hostfile") + 1] = c.hostfile
        args += ["--ssh-config", c.ssh_config]
    out = subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                         text=True, timeout=timeout, cwd=tmp_path, check=False)
    assert out.returncode == 0, (args, out.stderr[-3000:])
    if redirect and not redirect.startswith("/dev/"):
        (tmp_path / redirect).write_text(out.stdout)
    return out.stderr


def test_tune_drops_the_slow_nic_and_agrees_with_the_manual_recipe(make_cluster, tmp_path):
    c = make_cluster(2, links="eth0:auto:400mbit,eth1:auto:100mbit")

    # the one command, as README shows it (its defaults: 3 repeats)
    err = run_readme(c, tmp_path, "ncclcheck tune --hostfile hosts -o nccl.env --json")
    tuned = parse_env_text((tmp_path / "nccl.env").read_text())["NCCL_SOCKET_IFNAME"]
    doc = json.loads((tmp_path / "tune.json").read_text())
    assert doc["backend"] == "gloo" and doc["settings"]["repeats"] == 3
    rules = next(c for c in doc["candidates"] if c["id"] == "recommended")["env"]
    assert rules["NCCL_SOCKET_IFNAME"] == "=eth0,eth1"
    assert tuned == "=eth0" and doc["winner"]["trimmed"] == ["eth1"]
    assert not doc["winner"]["significant"] and "WINNER" not in err
    assert "loses eth1: eth1 alone measured" in doc["winner"]["why"]
    # gloo runs the baseline, the rules' list and =eth0 all on eth0 (bench resolves both lists
    # to GLOO_SOCKET_IFNAME=eth0 on each node, the interface the baseline's run used): one
    # configuration, so from round 1 the baseline's run is the others' repeat (2 runs, then 2,
    # then 1: eth1 stopped)
    by_id = {c["id"]: c for c in doc["candidates"]}
    for cid in ("recommended", "NCCL_SOCKET_IFNAME==eth0"):
        shared = [r for r in by_id[cid]["runs"] if r.get("same_run_as")]
        assert [r["round"] for r in shared] == [1, 2, 3] and {r["same_run_as"] for r in shared} == {
            "baseline"}, by_id[cid]["runs"]
        assert by_id[cid]["figures"] == by_id["baseline"]["figures"]
        assert {tuple(r["interfaces"]) for r in by_id[cid]["runs"]} == {("eth0",)}
    assert sum(not r.get("same_run_as") for c in doc["candidates"] for r in c["runs"]) == 5

    # the three-step manual recipe of README (recommend's tie, bench --compare, recommend --bench)
    (tmp_path / "nccl.env").unlink()
    run_readme(c, tmp_path, "ncclcheck probe --hostfile hosts -o cluster.json")
    run_readme(c, tmp_path, "ncclcheck recommend --probe cluster.json --candidates-dir cand/")
    run_readme(c, tmp_path, "ncclcheck bench --hostfile hosts --compare cand/*.env")
    run_readme(c, tmp_path, "ncclcheck recommend --probe cluster.json --bench compare.json")
    manual = parse_env_text((tmp_path / "nccl.env").read_text())["NCCL_SOCKET_IFNAME"]
    assert manual == tuned == "=eth0"
