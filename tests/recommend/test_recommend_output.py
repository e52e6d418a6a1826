"""ncclcheck/recommend/text.py output: comment lines never split a value; the header is true for
each way the file is read."""

from __future__ import annotations

import subprocess

from ncclcheck.recommend.text import _wrap, footer_lines, header_lines

HCAS = ",".join(f"mlx5_{i}:1" for i in range(12)) + ",mlx5_bond_0:1"


def test_comments_never_break_a_value():
    """Before: '# NOT SET NCCL_IB_HCA==mlx5_0:1,...,mlx' then '# 5_bond_0:1'."""
    doc = {"reasons": {}, "withheld": [{"var": "NCCL_IB_HCA", "value": "=" + HCAS,
                                        "rule": "ib-hca-select", "why": "ports differ"}],
           "refused": [{"var": "NCCL_SOCKET_IFNAME", "why": "node-01-eth0-very-long-name"}]}
    lines = footer_lines(doc)
    assert any(f"NCCL_IB_HCA==" + HCAS in line for line in lines), lines
    assert any("node-01-eth0-very-long-name" in line for line in lines), lines
    assert _wrap("on 2 node(s) (cloud-vm-01: x)", "", width=20) == ["on 2 node(s)",
                                                                     "(cloud-vm-01: x)"]


def test_header_says_what_sourcing_does(tmp_path):
    header = "\n".join(header_lines({"hosts": ["n1"], "env": {"NCCL_DEBUG": "WARN"}}, "env"))
    assert "wins over this file in NCCL" not in header
    assert "Sourced (set -a; .), this file overrides the environment." in header
    assert "Read by NCCL itself\n(NCCL_CONF_FILE, /etc/nccl.conf), a variable already in the " \
           "environment wins." in header
    env = tmp_path / "nccl.env"
    env.write_text("".join(f"# {line}\n" for line in header.splitlines()) + "NCCL_DEBUG=WARN\n")
    out = subprocess.run(["bash", "-c", 'set -a; . "$1"; set +a; echo "$NCCL_DEBUG"', "-",
                          str(env)], env={"NCCL_DEBUG": "INFO", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=10)
    assert out.stdout == "WARN\n"            # the file won over the environment, as it says


def test_explanation_at_80_columns_keeps_each_assignment_whole():
    """Before: a table squeezed the why column to 18 characters and split values mid-token."""
    import json
    import os
    import sys
    from pathlib import Path

    facts = Path(__file__).parent.parent / "fixtures" / "reports" / "roce-compare" / "cluster.json"
    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe", str(facts),
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=60)
    values = json.loads(out.stdout)["env"]
    lines = out.stderr.splitlines()
    for var, value in values.items():
        assert f"  {var}={value}" in lines, out.stderr
    assert "    set by net-socket-ifname  (--explain says why)" in lines
    explained = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe",
                                str(facts), "--explain"], capture_output=True, text=True,
                               env=env, timeout=60)
    assert "why:" in explained.stderr and "(--explain says why)" not in explained.stderr
