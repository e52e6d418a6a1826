"""Candidate configurations: strict, safe env-file parsing."""

from __future__ import annotations

import os

import pytest

from ncclcheck.bench.envfile import (
    candidate_env,
    load_env_file,
    parse_assignment,
    parse_env_text,
)
from ncclcheck.errors import BadInput

GOOD = """\
# written by ncclcheck recommend
NCCL_SOCKET_IFNAME==eth0,ens5
export NCCL_IB_HCA='^=mlx5_2:1'
NCCL_IB_GID_INDEX="3"

   NCCL_ALGO=Ring
GLOO_SOCKET_IFNAME=eth0
NCCL_NET_GDR_LEVEL=
"""


def test_reads_what_recommend_and_shells_write():
    assert parse_env_text(GOOD) == {
        "NCCL_SOCKET_IFNAME": "=eth0,ens5", "NCCL_IB_HCA": "^=mlx5_2:1",
        "NCCL_IB_GID_INDEX": "3", "NCCL_ALGO": "Ring", "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_NET_GDR_LEVEL": ""}


@pytest.mark.parametrize("line, why", [
    ("NCCL_ALGO=$(touch /tmp/pwned)", "plain text or quoted"),
    ("NCCL_ALGO=`id`", "plain text or quoted"),
    ('NCCL_ALGO="$HOME"', "plain text or quoted"),
    ("NCCL_ALGO=Ring; rm -rf /", "plain text or quoted"),
    ("NCCL_ALGO=Ring Tree", "plain text or quoted"),
    ("NCCL_ALGO='Ring", "plain text or quoted"),
    ("LD_PRELOAD=/tmp/evil.so", "not a network setting"),
    ("PATH=/tmp", "not a network setting"),
    ("PYTHONPATH=/tmp", "not a network setting"),
    ("NCCL_DEBUG_FILE=/tmp/x", "set by ncclcheck bench itself"),
    ("nccl_algo=ring", "expected NAME=value"),
    ("source other.env", "expected NAME=value"),
    ("NCCL_A=1 NCCL_B=2", "plain text or quoted"),
])
def test_refuses_anything_a_shell_would_do_more_with(line, why):
    with pytest.raises(BadInput, match=why) as info:
        parse_env_text(f"# ok\n{line}\n", "cand.env")
    assert str(info.value).startswith("cand.env:2:")


def test_nothing_is_evaluated(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "a.env"
    path.write_text(f"NCCL_ALGO='$(touch {marker})'\n")
    assert load_env_file(path) == {"NCCL_ALGO": f"$(touch {marker})"}
    assert not marker.exists()


def test_file_errors_are_one_line(tmp_path):
    with pytest.raises(BadInput, match="cannot read"):
        load_env_file(tmp_path / "missing.env")
    binary = tmp_path / "b.env"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BadInput, match="not UTF-8"):
        load_env_file(binary)


def test_env_flags_win_over_files(tmp_path):
    path = tmp_path / "a.env"
    path.write_text("NCCL_ALGO=Ring\nNCCL_PROTO=Simple\n")
    env = candidate_env(["NCCL_ALGO=Tree", "NCCL_SOCKET_IFNAME=eth0 with space"], [str(path)])
    assert env == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple",
                   "NCCL_SOCKET_IFNAME": "eth0 with space"}
    with pytest.raises(BadInput, match="not a network setting"):
        parse_assignment("HOME=/")
    assert "NCCL_ALGO" not in os.environ or os.environ["NCCL_ALGO"] != "Tree"
