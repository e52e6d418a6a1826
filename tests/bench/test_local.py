"""One node, real processes: gloo ranks spawned by the local agent (no GPU needed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ncclcheck.bench.formulas import OPS

pytest.importorskip("torch")
#: No test here is marked ``alone``: none asserts a timing of the shared CPU. The killed rank's
#: bound (30 s) is many times what its failure takes (the agent sees its child die), and the
#: streamed rows are held to the order of events, not to a rate.
pytestmark = [pytest.mark.slow, pytest.mark.torch]

SMALL = ["-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--timeout", "30"]


def bench(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "bench", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


#: The clean run: 3 sizes (the bar ends at 3/3), each long enough that a row printed as its
#: size finishes comes well before the next sizes' ops end.
CLEAN = ["--procs", "2", "-b", "1M", "-e", "4M", "-w", "5", "-n", "20", "--timeout", "60"]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """One clean run into pipes, in a TMPDIR of its own: the TMPDIR, the finished process
    (returncode, stdout, stderr) and each stdout line with the time it arrived."""
    tmp = tmp_path_factory.mktemp("clean")
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", *CLEAN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    arrivals: list[tuple[float, str]] = []
    try:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            arrivals.append((time.monotonic(), line.rstrip("\n")))
        err = proc.stderr.read()
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = subprocess.CompletedProcess(proc.args, proc.returncode,
                                      "".join(ln + "\n" for _, ln in arrivals), err)
    return tmp, out, arrivals


def op_args(op: str) -> list[str]:
    """test_every_op_checks_out's run of ``op``: one size; broadcast also checks -a 3
    (nccl-tests: the slowest rank)."""
    return ["--op", op, "--procs", "2", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1",
            "--dtype", "half" if op == "reduce_scatter" else "float", "--json",
            *(["-a", "3"] if op == "broadcast" else [])]


def compare_run(folder: Path) -> subprocess.CompletedProcess:
    """test_compare_of_nccl_algo_on_gloo_names_no_winner's run, its files in ``folder``."""
    ring, tree = folder / "ring.env", folder / "tree.env"
    ring.write_text("NCCL_ALGO=Ring\n")
    tree.write_text("NCCL_ALGO=Tree\n")
    return bench("--op", "all_gather", "--procs", "2", "-b", "1K", "-e", "64K", "-f", "4",
                 "-n", "5", "-w", "1", "--timeout", "30", "--compare", str(ring), str(tree),
                 "-o", str(folder / "compare.json"))


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    """The runs whose tests assert no timing of the shared CPU, two at a time, all finished
    before the first test that asks for them goes on: {name: (its folder, its result)}."""
    folders = {name: tmp_path_factory.mktemp(name)
               for name in ("badif", "all_reduce", "compare")}
    jobs: dict[str, Any] = {
        # a run whose NCCL_SOCKET_IFNAME matches no interface, in a TMPDIR of its own
        "badif": lambda: bench("--procs", "2", "-b", "1K", "-e", "1K", "--timeout", "30",
                               "--env", "NCCL_SOCKET_IFNAME=nosuch0",
                               env={**os.environ, "TMPDIR": str(folders["badif"])}),
        "all_reduce": lambda: bench("--procs", "2", *SMALL, "--env", "NCCL_ALGO=Ring", "--json",
                                    "-o", str(folders["all_reduce"] / "bench.json")),
        "compare": lambda: compare_run(folders["compare"]),
        # the clean run's command with stdout on a terminal
        "terminal": lambda: run_on_a_terminal([sys.executable, "-m", "ncclcheck", "bench",
                                               *CLEAN]),
        **{op: (lambda op=op: bench(*op_args(op))) for op in EVERY_OP},
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
    return {name: (folders.get(name), future.result()) for name, future in futures.items()}


@pytest.fixture(scope="module")
def bad_interface_run(side_by_side):
    """One run whose NCCL_SOCKET_IFNAME matches no interface, in a TMPDIR of its own."""
    return side_by_side["badif"]


def test_a_clean_run_says_nothing_on_stderr_and_leaves_nothing_behind(clean_run):
    """torch's warnings (FutureWarning for a deprecated collective, "Failed to initialize
    NumPy", c10d's hostname lines) stay in the rank logs, and those go with a clean run."""
    tmp_path, out, _ = clean_run
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert "# Avg bus bandwidth" in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_failed_run_keeps_its_rank_logs_and_says_where(bad_interface_run):
    tmp_path, out = bad_interface_run
    assert out.returncode == 1
    (kept,) = tmp_path.iterdir()
    assert kept.name.startswith("ncclcheck-bench-")
    assert f"[rank logs kept in {kept} on " in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert sorted(p.name for p in kept.glob("rank.*.stderr")) == ["rank.0.stderr",
                                                                 "rank.1.stderr"]


def assert_rows_follow_formulas(doc, time_key="time_us_mean"):
    """algbw/busbw from the reported time; that time is the mean over ranks (nccl-tests' -a 1)
    unless ``time_key`` names the slowest rank's (``-a max``)."""
    op, n = OPS[doc["op"]], doc["world_size"]
    for row in doc["rows"]:
        for key in ("out_of_place", "in_place"):
            cell = row[key]
            if cell is None:
                assert not op.in_place
                continue
            assert cell["wrong"] == 0
            assert cell["time_us_max"] >= cell["time_us_mean"] > 0
            assert cell["time_us"] == cell[time_key]
            assert cell["algbw_gbps"] == pytest.approx(row["size_bytes"] / 1e3 / cell["time_us"])
            assert cell["busbw_gbps"] == pytest.approx(cell["algbw_gbps"] * op.bus_factor(n))


def test_all_reduce_on_two_cpu_ranks(side_by_side):
    folder, out = side_by_side["all_reduce"]
    target = folder / "bench.json"
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc == json.loads(target.read_text())
    assert (doc["schema"], doc["source"], doc["backend"]) == ("ncclcheck/bench", "ncclcheck", "gloo")
    assert (doc["world_size"], doc["ranks_per_node"], len(doc["nodes"])) == (2, 2, 1)
    assert [r["size_bytes"] for r in doc["rows"]] == [1024, 8192, 65536]
    assert [r["count"] for r in doc["rows"]] == [256, 2048, 16384]
    assert_rows_follow_formulas(doc)
    assert doc["wrong_total"] == 0 and doc["check"] == 1
    assert doc["candidate_env"] == {"NCCL_ALGO": "Ring"}
    assert doc["env"]["NCCL_ALGO"] == "Ring" and doc["env"]["NCCL_DEBUG"] == "INFO"
    assert doc["env"]["GLOO_SOCKET_IFNAME"] == "lo"          # the route to 127.0.0.1
    assert doc["versions"]["torch"] and doc["transport"]["interfaces"] == ["lo"]
    assert [e["rank"] for e in doc["transport"]["per_rank"]] == [0, 1]
    assert doc["launch"]["mode"] == "local"


EVERY_OP = ["reduce_scatter", "broadcast", "alltoall", "sendrecv"]


@pytest.mark.parametrize("op", EVERY_OP)
def test_every_op_checks_out(side_by_side, op):
    """all_reduce: test_all_reduce_on_two_cpu_ranks; all_gather: the --compare test's runs."""
    slowest = op == "broadcast"      # one op also checks -a 3 (nccl-tests: the slowest rank)
    assert ("-a" in op_args(op)) == slowest
    out = side_by_side[op][1]
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["op"] == op and len(doc["rows"]) == 1
    assert doc["time_basis"].startswith("slowest rank" if slowest else "mean over ranks")
    assert_rows_follow_formulas(doc, "time_us_max" if slowest else "time_us_mean")
    row = doc["rows"][0]
    assert row["size_bytes"] == 4096
    assert (row["in_place"] is None) == (op in ("alltoall", "sendrecv"))


def rank_processes(marker: str) -> dict[int, int]:
    """{rank: pid} of worker processes whose environment carries ``marker``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"NCCL_TEST_MARKER={marker}".encode() in env:
            for var in env:
                if var.startswith(b"RANK="):
                    found[int(var[5:])] = int(entry)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_killed_rank_fails_the_run_names_it_and_leaves_nothing(tmp_path):
    marker = f"m{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", "--procs", "2",
                             "-b", "64K", "-e", "64K", "-n", "100000", "-w", "1",
                             "--timeout", "20", "--env", f"NCCL_TEST_MARKER={marker}",
                             "--nccl-log-dir", str(tmp_path / "logs")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        ranks: dict[int, int] = {}
        while time.monotonic() < end and len(ranks) < 2:
            ranks = rank_processes(marker)
            time.sleep(0.2)
        assert len(ranks) == 2, proc.stderr.read() if proc.poll() is not None else "no ranks"
        time.sleep(4)                      # into the timed loop
        family = [ranks[0], ranks[1]]
        agent = int(Path(f"/proc/{ranks[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        family.append(agent)
        killed_at = time.monotonic()
        os.kill(ranks[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=20 + 10)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert took < 30
    assert err.startswith(f"ncclcheck: error: rank 1 on {socket.gethostname()}: "
                          "rank process killed by signal 9")
    assert "Traceback" not in err
    assert f"[rank logs kept in {tmp_path / 'logs'} on " in err
    assert (tmp_path / "logs" / "rank.1.stderr").exists()
    time.sleep(0.5)
    assert not [pid for pid in family if alive(pid)]
    assert rank_processes(marker) == {}


def run_on_a_terminal(argv: list[str]) -> subprocess.CompletedProcess:
    """Run ``argv`` with stdout on a pseudo-terminal: its exit code, everything it wrote there
    (``stdout``) and its stderr."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(120)
    os.close(master)
    return subprocess.CompletedProcess(argv, proc.returncode,
                                       b"".join(chunks).decode("utf-8", "replace"),
                                       proc.stderr.read().decode("utf-8", "replace"))


def test_progress_bar_on_a_terminal_only(clean_run, side_by_side):
    """The bar on a terminal; the same run into pipes (the clean run) has none."""
    terminal = side_by_side["terminal"][1]
    assert terminal.returncode == 0, terminal.stderr
    shown = terminal.stdout
    assert "3/3" in shown and "\x1b[" in shown          # rich's bar, then the table
    assert "# Avg bus bandwidth" in shown
    piped = clean_run[1]
    assert piped.returncode == 0
    assert "\x1b[" not in piped.stdout + piped.stderr and "3/3" not in piped.stdout


def test_compare_of_nccl_algo_on_gloo_names_no_winner(side_by_side):
    tmp_path, out = side_by_side["compare"]
    assert out.returncode == 0, out.stderr
    # each run is all_gather's check (what test_every_op_checks_out checks of the other ops)
    runs = json.loads((tmp_path / "compare.json").read_text())["runs"]
    assert len(runs) == 2
    for run in runs:
        doc = run["bench"]
        assert doc["op"] == "all_gather" and doc["time_basis"].startswith("mean over ranks")
        assert [r["size_bytes"] for r in doc["rows"]] == [1024, 4096, 16384, 65536]
        assert all(r["in_place"] is not None for r in doc["rows"])
        assert_rows_follow_formulas(doc)
    assert "# gloo ignores NCCL_ALGO" in out.stdout
    assert "# no winner: the runs differ only in settings the backend ignores" in out.stdout
    body = out.stdout.splitlines()[1:]
    assert not any(ln.startswith("# best:") or "*" in ln for ln in body), out.stdout


def test_an_interface_error_is_said_once_and_lists_only_ipv4_interfaces(bad_interface_run):
    """Issue 27 item 13: 'have:' listed interfaces without IPv4 (where gloo cannot bind) and
    the line came again for every rank."""
    import socket

    from ncclcheck.bench.ifname import local_interfaces

    out = bad_interface_run[1]
    assert out.returncode == 1
    [line] = [ln for ln in out.stderr.splitlines() if "matches no interface" in ln]
    assert line.count("matches no interface") == 1, line
    assert any(f"ranks {r} on {socket.gethostname()}:" in line for r in ("1, 0", "0, 1")), line
    have = line.split("(have: ")[1].split(")")[0].split(", ")
    assert have and all(addr for name, addr in local_interfaces() if name in have), have
    assert [n for n, a in local_interfaces() if a is None and n in have] == []


def test_piped_bench_prints_the_first_row_before_the_last_size_runs(clean_run):
    """The table row by row as each size finishes (ncclcheck/render/bench_stream.py), on the
    clean run into a pipe: the last row can only come after its own ops ran, so the first row
    must arrive at least that long before it (all at once, the gap would be ~0)."""
    _, out, arrivals = clean_run
    assert out.returncode == 0, out.stderr
    rows = [(t, ln) for t, ln in arrivals if ln and not ln.startswith("#")]
    assert len(rows) == 3
    last_size_us = float(rows[-1][1].split()[5])                 # out-of-place time per op
    last_size_s = (5 + 20) * last_size_us / 1e6                   # its warm-up and timed block
    assert rows[-1][0] - rows[0][0] >= last_size_s, (rows, last_size_s)
    head = [t for t, ln in arrivals if ln.startswith("# nThread")][0]
    assert head <= rows[0][0]
    assert any("no launcher detected" in ln for _, ln in arrivals)
