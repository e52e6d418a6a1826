"""Slurm launcher helpers (ncclcheck/remote/slurm.py) and pdsh input; srun itself runs for real in
tests/test_launchers.py."""

from __future__ import annotations

import pytest

from ncclcheck import cluster
from ncclcheck.remote import slurm
from ncclcheck.errors import BadInput
from ncclcheck.remote.pdsh import split_pdsh


def test_node_lists_expand_like_scontrol_show_hostnames():
    assert slurm.expand_nodelist("gpu[001-003],login") == ["gpu001", "gpu002", "gpu003", "login"]
    assert slurm.expand_nodelist("a[9-10]") == ["a9", "a10"]
    with pytest.raises(BadInput, match="cannot read 'x'"):
        slurm.expand_nodelist("n[x]")


def test_the_default_launcher_is_slurm_only_inside_an_allocation_outside_a_step():
    alloc = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert slurm.choose_launcher(None, None, [], environ=alloc) == "slurm"
    assert slurm.choose_launcher(None, None, [], environ={**alloc, "SLURM_STEP_ID": "0"}) is None
    assert slurm.choose_launcher(None, None, [], environ={}) is None
    assert slurm.choose_launcher(None, None, ["facts/"], environ=alloc) is None
    assert slurm.choose_launcher(None, None, [], replay="rec", environ=alloc) is None
    assert slurm.choose_launcher("ssh", None, [], environ=alloc) == "ssh"
    with pytest.raises(BadInput, match="drop --hostfile"):
        slurm.choose_launcher("slurm", "hosts", [], environ=alloc)


def test_outside_an_allocation_launcher_slurm_says_what_to_do():
    with pytest.raises(BadInput, match="run inside salloc or sbatch"):
        slurm.allocation_nodes({})
    with pytest.raises(BadInput, match="outside srun"):
        slurm.allocation_nodes({"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0"})


def test_srun_runs_one_task_per_node_with_a_step_time_limit():
    argv = slurm.srun_argv(3, ["py", "-m", "x"], True, "j", 150)
    assert argv[:7] == ["srun", "--nodes", "3", "--ntasks", "3", "--ntasks-per-node", "1"]
    assert "--kill-on-bad-exit=1" in argv and "--time=3" in argv
    assert argv[-4:] == ["--", "py", "-m", "x"]


def test_labelled_output_is_split_per_task_and_srun_lines_are_left_out():
    got = slurm.split_labelled("0: a\n 1: b\nsrun: error: node2: task 1: Exited\n0: c\n")
    assert dict(got) == {0: ["a", "c"], 1: ["b"]}


def test_pdsh_output_is_put_back_together_per_host(tmp_path):
    import json

    def facts(name: str) -> str:
        doc = {"schema": "ncclcheck/facts", "schema_version": 1, "hostname": name,
               "sections": {}}
        return json.dumps(doc, indent=1)

    lines = []
    a, b = facts("n1").splitlines(), facts("n2").splitlines()
    for x, y in zip(a, b):  # interleaved, as pdsh prints them
        lines += [f"n1: {x}", f"n2: {y}"]
    lines.append("n3: bash: ncclcheck: command not found")
    path = tmp_path / "pdsh.txt"
    path.write_text("\n".join(lines) + "\n")
    doc = cluster.load_sources([str(path)])
    assert sorted(n["hostname"] for n in doc["nodes"]) == ["n1", "n2"]
    assert doc["failed"][0]["host"] == "n3"
    assert "command not found" in doc["failed"][0]["reason"]
    assert split_pdsh('{"hostname": "n1"}') is None
