"""Bad input never hurts, third round (issue 28): one test per item, each failing on the code
before it. The fuzz over every document kind and every command's options is in
tests/test_fuzz_readers.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fuzz_docs import run_cli

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
FACTS = FIXTURES / "hosts" / "h100-ib-8gpu" / "facts.json"
PAIRWISE = FIXTURES / "reports" / "netns-hunt" / "pairwise.json"
TABLE = FIXTURES / "nccl-tests" / "a3mega-h100-2x8-all_reduce.txt"


def ncclcheck(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          timeout=kw.pop("timeout", 120), check=False, **kw)


def write(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


# -- 1. open schema fields -------------------------------------------------------------------------

def _pairwise_cases():
    def short_row(d):
        d["matrix"]["gbps"][0] = d["matrix"]["gbps"][0][:-1]

    def extra_host(d):
        d["hosts"].append("ghost")

    def no_peer(d):
        d["slow_nodes"][0]["pairs"][0].pop("peer")

    def string_median(d):
        d["fleet"]["median_gbps"] = "x"

    def null_score(d):
        d["slow_nodes"][0]["score"] = None

    return [short_row, extra_host, no_peer, string_median, null_score]


@pytest.mark.parametrize("change", _pairwise_cases(), ids=lambda f: f.__name__)
def test_report_on_a_pairwise_document_the_schema_leaves_open(tmp_path, change):
    doc = json.loads(PAIRWISE.read_text())
    if change.__name__ in ("no_peer", "null_score") and not doc["slow_nodes"]:
        pytest.skip("the fixture has no slow node")
    change(doc)
    out = run_cli(["report", write(tmp_path / "p.json", doc), "-o", str(tmp_path / "r.html")])
    assert out.code in (0, 2) and not out.internal, out.stderr
    if change.__name__ in ("short_row", "extra_host"):
        assert out.code == 2 and "N x N" in out.stderr


@pytest.mark.parametrize("where", ["gpu.gpus", "gpu.nvlinks", "ib.devices", "ib.ports",
                                   "network.interfaces"])
def test_report_on_facts_with_a_null_item(tmp_path, where):
    doc = json.loads(FACTS.read_text())
    data = {k: v["data"] for k, v in doc["sections"].items() if isinstance(v.get("data"), dict)}
    if where == "gpu.gpus":
        data["gpu"]["gpus"].append(None)
    elif where == "gpu.nvlinks":
        data["gpu"]["gpus"][0]["nvlinks"] = [None]
    elif where == "ib.devices":
        data["ib"]["devices"].append(None)
    elif where == "ib.ports":
        data["ib"]["devices"][0]["ports"].append(None)
    else:
        data["network"]["interfaces"].append(None)
    path = write(tmp_path / "f.json", doc)
    for argv in (["report", path, "-o", str(tmp_path / "r.html")], ["probe", "--from", path],
                 ["recommend", "--probe", path, "-q"]):
        out = run_cli(argv)
        assert out.code in (0, 2) and not out.internal, (argv, out.stderr)


# -- 2. text that is not text --------------------------------------------------------------------

def test_a_lone_surrogate_is_written_escaped(tmp_path):
    doc = json.loads(FACTS.read_text())
    doc["hostname"] = "node1\ud800"
    path = write(tmp_path / "s.json", doc)
    for argv in (["report", path, "-o", str(tmp_path / "r.html")], ["probe", "--from", path],
                 ["recommend", "--probe", path]):
        out = ncclcheck(*argv, cwd=tmp_path)
        assert out.returncode == 0, (argv, out.stderr[-500:])
    assert "node1\\ud800" in (tmp_path / "r.html").read_text()


def test_a_non_utf8_argument_is_written_escaped(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "report", str(FACTS), "--title",
                          os.fsdecode(b"bad\xff"), "-o", str(tmp_path / "t.html")],
                         capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-500:]
    assert "bad\\udcff" in (tmp_path / "t.html").read_text()


# -- 3. inputs at the size caps ------------------------------------------------------------------

def test_the_caps_fit_a_2_gb_address_space():
    """scripts/bench-memory.py measured the peak per byte at each cap: a cluster document ~6x
    (recommend, report), a hostfile ~6x, an nccl-tests table ~40x (every row a dict), an env
    file ~32x of 1 MiB. Each cap times its factor, plus the interpreter, stays under
    ``prlimit --as=2000000000``."""
    from ncclcheck.infile import LIMITS

    factor = {"document": 7, "hostfile": 7, "table": 40, "envfile": 40}
    assert all(LIMITS[k] * factor[k] + 300e6 < 2e9 for k in LIMITS), LIMITS


def test_several_documents_share_one_cap(tmp_path, monkeypatch):
    from ncclcheck import infile
    from ncclcheck.errors import BadInput

    monkeypatch.setitem(infile.LIMITS, "document", 1000)
    paths = [tmp_path / f"{i}.json" for i in range(3)]
    for p in paths:
        p.write_text("x" * 400)
    infile.start_command()
    infile.read_bytes(paths[0]), infile.read_bytes(paths[1])
    with pytest.raises(BadInput, match="together"):
        infile.read_bytes(paths[2])
    infile.start_command()


# -- 4. absurd option values, bad paths, huge env files: exit 2 at parse time -----------------

@pytest.mark.parametrize("option", [["-n", "99999999999999999999"], ["-w", "99999999999"],
                                    ["--timeout", "1e300"], ["--timeout", "nan"],
                                    ["--procs", "100000"], ["--connect-timeout", "1e300"],
                                    ["-e", "2T"], ["--nccl-log-dir", "/proc/nope/logs"]])
def test_absurd_bench_options_are_exit_2_before_anything_starts(option):
    out = run_cli(["bench", "--procs", "1", "-b", "8", "-e", "8", "-n", "1", "-w", "0", *option])
    assert out.code == 2 and not out.internal, out.stderr
    assert out.seconds < 10


def test_an_env_file_of_10000_settings_is_exit_2(tmp_path):
    env = tmp_path / "big.env"
    env.write_text("".join(f"NCCL_SETTING_{i}=1\n" for i in range(10000)))
    for argv in (["bench", "--procs", "1", "-e", "8", "--env-file", str(env)],
                 ["bench", "--procs", "1", "-e", "8", "--compare", str(env)]):
        out = run_cli(argv)
        assert out.code == 2 and "settings" in out.stderr, out.stderr


# -- 5. control characters from --env ------------------------------------------------------------

@pytest.mark.parametrize("value", ["a\rb", "a\u202eb", "a\x1b[2Jb"])
def test_control_characters_in_env_are_refused(value):
    out = run_cli(["bench", "--procs", "1", "-e", "8", "--env", f"NCCL_ALGO={value}"])
    assert out.code == 2 and "control character" in out.stderr, out.stderr
    assert "\r" not in out.stderr and "\u202e" not in out.stderr and "\x1b" not in out.stderr


# -- 6. -o through file descriptors --------------------------------------------------------------

@pytest.mark.parametrize("target", ["/dev/stderr", "//dev/stdout", "/dev/fd/2", "/dev//stderr"])
def test_o_through_a_descriptor_writes_the_stream(tmp_path, target):
    log = tmp_path / "log.txt"
    log.write_text("an earlier line\n")
    with open(log, "a") as f:
        out = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe", str(FACTS),
                              "-q", "-o", target], stdout=f, stderr=f, timeout=120, check=False)
    assert out.returncode == 0
    text = log.read_text()
    assert text.startswith("an earlier line\n") and "NCCL_" in text, text[:300]


# -- 7. -o checked before the work ---------------------------------------------------------------

def test_an_unwritable_o_is_refused_before_the_runs(tmp_path):
    env = tmp_path / "a.env"
    env.write_text("NCCL_ALGO=Ring\n")
    out = run_cli(["bench", "--compare", str(env), "--procs", "1", "-e", "8", "-o",
                   str(tmp_path / "missing" / "out.json")])
    assert out.code == 2 and "cannot write" in out.stderr
    assert "running" not in out.stderr and out.seconds < 10, out.stderr


@pytest.mark.parametrize("argv", [["diagnose", str(FIXTURES / "logs")],
                                  ["tune", "--hostfile", "/nonexistent/hosts"]])
def test_every_o_is_checked_first(tmp_path, argv):
    out = run_cli([*argv, "-o", str(tmp_path / "missing" / "x")])
    assert out.code == 2 and "cannot write" in out.stderr, out.stderr


# -- 8. quadratic work ---------------------------------------------------------------------------

def test_shared_subnets_is_linear_in_the_interfaces():
    from ncclcheck.rules.net_same_subnet_nics import shared_subnets

    calls = [0]

    class Name(str):
        __hash__ = str.__hash__

        def __eq__(self, other):
            calls[0] += 1
            return str.__eq__(self, other)

    n = 3000
    ifaces = [{"name": Name(f"eth{i}"), "kind": "physical", "operstate": "up", "carrier": True,
               "ipv4": [{"address": f"10.0.{i // 250}.{i % 250 + 1}", "subnet": "10.0.0.0/8"}]}
              for i in range(n)]
    facts = {"sections": {"network": {"status": "ok", "data": {"interfaces": ifaces}}}}
    assert len(shared_subnets(facts)["10.0.0.0/8"]) == n
    assert calls[0] < 10 * n, calls[0]


# -- 9. smaller ----------------------------------------------------------------------------------

def test_a_fifo_with_no_writer_is_exit_2_not_a_hang(tmp_path):
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)
    start = time.monotonic()
    out = ncclcheck("rank", "--hostfile", str(fifo), timeout=60)
    assert out.returncode == 2 and b"FIFO" in out.stderr, out.stderr
    assert time.monotonic() - start < 50


def test_a_fifo_that_is_written_is_read(tmp_path):
    fifo = tmp_path / "hosts"
    os.mkfifo(fifo)

    def writer():
        time.sleep(0.5)
        with open(fifo, "w") as f:
            f.write("127.0.0.1\n")

    threading.Thread(target=writer, daemon=True).start()
    out = ncclcheck("rank", "--hostfile", str(fifo), timeout=60)
    assert out.returncode == 0 and b"NNODES=1" in out.stdout, out.stderr


def test_a_long_bad_token_is_cut_with_an_ellipsis(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("bad!" + "x" * (1 << 20) + "\n")
    out = run_cli(["rank", "--hostfile", str(hosts)])
    assert out.code == 2 and len(out.stderr) < 2000 and "..." in out.stderr, len(out.stderr)
    out = run_cli(["bench", "--procs", "1", "-e", "9" * 100000])
    assert out.code == 2 and len(out.stderr) < 2000, len(out.stderr)


@pytest.mark.parametrize("argv", [["rank", "--hostfile", str(FACTS), "--master-port", "\u0663"],
                                  ["bench", "--procs", "\u0663"], ["bench", "-e", "\u0663M"],
                                  ["rank", "--hostfile", str(FACTS), "--port-range", "\u0663-9"]])
def test_non_ascii_digits_are_not_numbers(argv):
    out = run_cli(argv)
    assert out.code == 2 and not out.internal, out.stderr


def test_non_ascii_digits_in_a_hostfile(tmp_path):
    from ncclcheck.errors import BadInput
    from ncclcheck.hostfile import parse_hostfile

    with pytest.raises((ValueError, BadInput)):
        parse_hostfile("198.18.0.1 slots=\u0663\n", "hosts")


# -- 11. non-terminal output is not wrapped mid-phrase -------------------------------------------

def test_a_long_line_to_a_pipe_is_one_line(monkeypatch):
    import io

    from ncclcheck.textsafe import safe_console

    monkeypatch.delenv("COLUMNS", raising=False)
    console = safe_console(file=io.StringIO())
    line = "verify with " + "/a/very/long/path" * 10 + "/libnccl.so.2: NCCL bootstraps on fast0"
    console.print(line)
    assert console.file.getvalue() == line + "\n"


def test_stderr_lines_are_not_wrapped_at_a_long_path(tmp_path):
    """``record`` says where it wrote through rich: at a long path, still one line."""
    folder = tmp_path / ("d" * 120) / "rec"
    out = ncclcheck("record", str(folder), "--root", str(FIXTURES / "hosts" / "h100-ib-8gpu"),
                    env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert out.returncode == 0, out.stderr
    lines = out.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("recorded to ") and str(folder) in lines[0]


# -- 10. the suite's own hygiene -----------------------------------------------------------------

def test_a_cluster_left_by_a_killed_run_is_reaped(tmp_path, monkeypatch):
    import netns_cluster

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for name, owner in (("gone", dead.pid), ("mine", os.getpid()), ("byhand", None)):
        folder = tmp_path / f"ncclcheck-netns-{name}"
        folder.mkdir()
        state = {"nodes": []} if owner is None else {"nodes": [], "owner_pid": owner}
        (folder / "state.json").write_text(json.dumps(state))
    torn: list[str] = []
    monkeypatch.setattr(netns_cluster.impl, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(netns_cluster, "teardown", torn.append)
    assert netns_cluster.reap_orphans() == ["gone"] and torn == ["gone"]


def test_sigterm_ends_the_run_as_an_interrupt():
    import signal

    import conftest

    assert signal.getsignal(signal.SIGTERM) is conftest._terminated


def test_a_cluster_document_with_no_node_is_bad_input(tmp_path):
    """The one case the wrong-type sweep left at exit 1: `nodes: []` in a cluster document."""
    import json
    import subprocess
    import sys

    facts = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--replay",
                            "tests/fixtures/hosts/cloud-vm-1nic", "--json"],
                           capture_output=True, text=True, timeout=120, check=False).stdout
    (tmp_path / "f.json").write_text(facts)
    cluster = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--from",
                              str(tmp_path / "f.json"), "--json"],
                             capture_output=True, text=True, timeout=120, check=False).stdout
    doc = json.loads(cluster)
    doc["nodes"], doc["failed"] = [], []
    (tmp_path / "c.json").write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "recommend", "--probe",
                          str(tmp_path / "c.json")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "holds no node" in out.stderr
