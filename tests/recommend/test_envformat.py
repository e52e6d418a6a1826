"""The env file is read the same way by bash, python-dotenv and NCCL's own config reader."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ncclcheck.envformat import (
    SAFE_VALUE,
    parse_env_text,
    render,
    render_deepspeed,
    render_env,
    render_shell,
    split_safe,
    unsafe_reason,
)
from ncclcheck.recommend.verify import find_libnccl, run_child

ENV = {
    "NCCL_SOCKET_IFNAME": "=eth0,ens5",
    "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p",
    "NCCL_EXCLUDE": "^docker,lo,virbr",
    "NCCL_ODD": "a=b:c@d+e-f_g.h/i,j",
}
NOTES = {"NCCL_SOCKET_IFNAME": ["net-socket-ifname: use eth0 (with 'quotes', $dollars and \\\\)"]}
UNSAFE = ["a b", "it's", 'say "hi"', "$(touch /tmp/pwned)", "`id`", "a\\b", "x#y", "~/f",
          "a;b", "a*", "line\nbreak", ""]


def bash_reads(path):
    out = subprocess.run(["bash", "-c", 'set -a; . "$1"; set +a; env -0', "bash", str(path)],
                         capture_output=True, timeout=30, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout.decode()
    pairs = (item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith("NCCL_")}


def test_render_env_round_trips_through_bash_dotenv_and_nccls_parser(tmp_path):
    path = tmp_path / "nccl.env"
    path.write_text(render_env(ENV, NOTES, ["header with a 'quote'"], ["footer # with hash"]))
    assert bash_reads(path) == ENV
    assert parse_env_text(path.read_text()) == ENV
    dotenv = pytest.importorskip("dotenv")
    assert {k: v for k, v in dotenv.dotenv_values(path).items()} == ENV


def test_shell_format_round_trips_through_bash(tmp_path):
    path = tmp_path / "nccl.sh"
    path.write_text(render_shell(ENV, NOTES, ["h"]))
    out = subprocess.run(["bash", "-c", '. "$1"; env -0', "bash", str(path)], capture_output=True,
                         timeout=30, check=True, env={"PATH": "/usr/bin:/bin"}).stdout.decode()
    got = dict(item.split("=", 1) for item in out.split("\0") if item.startswith("NCCL_"))
    assert got == ENV


def test_deepspeed_format_has_only_assignments():
    text = render_deepspeed(ENV)
    lines = text.splitlines()
    assert len(lines) == len(ENV)
    # DeepSpeed's runner: key, val = line.split('=', maxsplit=1) on every line, then strip.
    assert {k.strip(): v.strip() for k, v in (ln.split("=", 1) for ln in lines)} == ENV


def test_json_format_is_the_document():
    assert json.loads(render("json", ENV, document={"env": ENV}))["env"] == ENV


@pytest.mark.parametrize("value", UNSAFE)
def test_unsafe_values_are_refused_with_a_reason(value):
    assert unsafe_reason("NCCL_X", value)
    ok, refused = split_safe({"NCCL_X": value, "NCCL_Y": "1"})
    assert ok == {"NCCL_Y": "1"} and refused[0]["var"] == "NCCL_X" and refused[0]["why"]
    with pytest.raises(ValueError):
        render_env({"NCCL_X": value})


def test_every_safe_character_reads_the_same_in_bash(tmp_path):
    chars = "".join(chr(c) for c in range(33, 127) if SAFE_VALUE.match(chr(c)))
    env = {"NCCL_ALL": chars, "NCCL_LEAD_EQ": "==x", "NCCL_CARET": "^=mlx5_1"}
    path = tmp_path / "all.env"
    path.write_text(render_env(env))
    assert bash_reads(path) == env
    assert parse_env_text(path.read_text()) == env


LIB = find_libnccl()


@pytest.mark.skipif(LIB is None, reason="needs libnccl (pip install nvidia-nccl-cu12)")
def test_ncclS_own_reader_sets_exactly_these_values(tmp_path):
    """libnccl reads the file through NCCL_CONF_FILE and puts each value into the environment."""
    path = tmp_path / "nccl.env"
    # the real NCCL writes its log where the file says: into tmp_path, not /tmp
    env = {**ENV, "NCCL_SOCKET_IFNAME": "=lo", "NCCL_DEBUG_FILE": f"{tmp_path}/nccl.%h.%p"}
    text = render_env(env, NOTES, ["a header line"], ["a footer line"])
    path.write_text(text)
    answer, log = run_child(LIB, text, str(path), True, 30)
    assert answer.get("loaded"), answer
    assert answer["environ"] == env, log[-2000:]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_refused_value_never_reaches_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    ok, refused = split_safe({"NCCL_X": f"$(touch {marker})", "NCCL_Y": "1"})
    path = tmp_path / "nccl.env"
    path.write_text(render_env(ok))
    bash_reads(path)
    assert not marker.exists() and refused
