"""ncclcheck bench's command line: bad input is one line and exit 2; torch is optional."""

from __future__ import annotations

import subprocess
import sys

import pytest


def ncclcheck(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=60, **kw)


@pytest.mark.parametrize("args, needle", [
    (["bench", "-b", "1.5M"], "K = 1024"),
    (["bench", "-b", "1M", "-e", "1K"], "max-bytes must be >= min-bytes"),
    (["bench", "--dtype", "complex"], "unknown type"),
    (["bench", "--env", "LD_PRELOAD=/tmp/x.so"], "not a network setting"),
    (["bench", "--env", "NCCL_ALGO"], "expected KEY=VALUE"),
    (["bench", "--env-file", "/no/such.env"], "cannot read"),
    (["bench", "a.env"], "need --compare"),
    (["bench", "--compare"], "at least one env file"),
    (["bench", "--compare", "--import", "x", "a.env"], "cannot be combined"),
    (["bench", "--nodes", "2"], "--nodes needs --hostfile"),
    (["bench", "--hostfile", "/no/such/hosts"], "cannot read hostfile"),
    (["bench", "--op", "sendrecv", "--procs", "1"], "sendrecv needs at least 2 ranks"),
    (["bench", "--master-addr", "-oProxyCommand=x"], "starts with '-'"),
    (["bench", "--remote-python", "python; reboot", "--hostfile", "/x"], "absolute path"),
    (["bench", "--check", "2"], "Invalid value"),
    (["bench", "-a", "median"], "-a/--average median: expected one of rank0, mean, min, max"),
    (["bench", "-b", "1X"], "K = 1024"),
    (["bench", "--env-file", "{bad_env}"], "value must be plain text"),
    (["bench", "--hostfile", "{bad_hosts}"], ":2: 'node;rm' is not a valid host name"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    (tmp_path / "bad.env").write_text("NCCL_SOCKET_IFNAME=$(touch /tmp/x)\n")
    (tmp_path / "hosts").write_text("node1\nnode;rm\n")
    args = [a.format(bad_env=tmp_path / "bad.env", bad_hosts=tmp_path / "hosts") for a in args]
    out = ncclcheck(*args)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    if not needle.startswith("Invalid value"):          # click's own usage errors are longer
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_without_torch_bench_says_how_to_install_it():
    code = ("import sys\nsys.modules['torch'] = None\nfrom ncclcheck.cli.main import main\n"
            "main(['bench', '--procs', '2', '-e', '1K'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == ("ncclcheck: error: torch is not installed; pip install torch "
                                  "(in ncclcheck's source folder: pip install '.[bench]')")


def test_help_lists_the_nccl_tests_flags():
    out = ncclcheck("bench", "--help")
    assert out.returncode == 0
    for flag in ("-b, --min-bytes", "-e, --max-bytes", "-f, --step-factor", "-w, --warmup",
                 "-n, --iters", "-c, --check", "--hostfile", "--compare", "--import"):
        assert flag in out.stdout


def test_over_gloo_the_default_sweep_ends_at_8m_and_a_given_e_is_kept():
    """CPU ranks (gloo): past a few MiB the sizes only take time, so the sweep -e leaves at its
    default ends at 8 MiB there; NCCL keeps 128M, and an -e given holds for both."""
    from ncclcheck.bench.command import BenchRequest, bench_options

    default = bench_options(BenchRequest(gloo_end=True))
    gloo, nccl = default.worker_spec("gloo"), default.worker_spec("nccl")
    assert (gloo["sizes"][0], gloo["sizes"][-1], len(gloo["sizes"])) == (8, 8 << 20, 21)
    assert gloo["sweep"]["max_bytes"] == 8 << 20
    assert nccl["sizes"][-1] == nccl["sweep"]["max_bytes"] == 128 << 20
    given = bench_options(BenchRequest(max_bytes="64M")).worker_spec("gloo")
    assert given["sizes"][-1] == 64 << 20
    high = bench_options(BenchRequest(min_bytes="16M", gloo_end=True)).worker_spec("gloo")
    assert high["sizes"] == [16 << 20]
