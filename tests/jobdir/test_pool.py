"""Dumps read by worker processes (ncclcheck/jobdir/pool.py) give the document one process gives,
refuse a hostile pickle as one process does, and leave no process behind, however they end."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import ncclcheck.jobdir.inputs as inputs
import ncclcheck.jobdir.pool as pool
from ncclcheck.cli.main import main
from ncclcheck.diagnose import diagnose_files
from ncclcheck.errors import BadInput
from ncclcheck.logparse import parallel
from tests.jobdir.test_jobdir import Boom, dump, entry

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
H200 = FIXTURES / "device" / "h200" / "fr"
GLOO = FIXTURES / "fr-gloo"
#: real dumps: torch 2.13's nccl on an H200 (pickle and JSON, on demand and on timeout), a
#: finished 2-rank gloo job's (pickle and JSON), and the two together with torch's own log
GLOO_DUMPS = sorted(GLOO.glob("gloo_trace_rank_*"))
REAL = {"h200": [H200], "gloo": GLOO_DUMPS, "gloo-pickle": GLOO_DUMPS[::2],
        "h200-pickle": [H200 / "on-demand.nccl.pickle", H200 / "timeout_rank_0"],
        "all": [H200, *GLOO_DUMPS]}


@pytest.fixture
def pooled(monkeypatch):
    """Every run reads its dumps in 2+ workers (even on one CPU); returns the outcomes the
    workers gave, per run."""
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    taken: list[list[str]] = []
    real = pool.read_ahead

    def spy(job, dumps, workers, read):
        assert workers >= 2
        real(job, dumps, workers, read)
        taken.append([kind for kind, _, _ in job.prefetched.values()])

    monkeypatch.setattr(pool, "read_ahead", spy)
    return taken


def _doc(paths):
    doc = diagnose_files([str(p) for p in paths])
    doc.pop("created_at", None)
    return doc


@pytest.mark.parametrize("name", sorted(REAL))
def test_workers_give_the_document_of_one_process_on_real_dumps(name, pooled, monkeypatch):
    paths = REAL[name]
    dumps = [p for p in inputs.expand([str(p) for p in paths]) if inputs._is_dump(p)]
    assert len(dumps) >= 2
    got = _doc(paths)
    # every dump came from a worker (torch's empty on-demand JSON is no dump: "bad")
    assert len(pooled) == 1 and len(pooled[0]) == len(dumps) and "trace" in pooled[0]
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 10 ** 9)
    assert got == _doc(paths)


def test_workers_give_the_document_of_one_process_on_mixed_dumps(tmp_path, pooled, monkeypatch):
    # gaps in a window, two groups, p2p entries, nccl timings, JSON, a file that is no dump,
    # and signatures each worker meets in another order
    import json

    sub = ("1", "sub")
    for r in range(9):
        mine = [entry(1, "reduce_scatter", process_group=sub)]
        world = [entry(1), entry(2, "send", is_p2p=True), *(() if r == 4 else (entry(2),)),
                 entry(3, "broadcast" if r == 6 else "all_reduce", size=8 + r % 2)]
        data = dump(mine + world if 2 <= r <= 5 else world + mine, "[0, 1, 2, 3, 4, 5, 6, 7, 8]")
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(
            json.dumps(data).encode() if r == 5 else pickle.dumps(data, protocol=2 + r % 4))
    (tmp_path / "nccl_trace_rank_9").write_text('{"entries": [], "pg_config": {}}')
    got = _doc([tmp_path])
    assert len(pooled) == 1 and pooled[0].count("trace") == 9 and pooled[0].count("bad") == 1
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 10 ** 9)
    assert got == _doc([tmp_path])


def test_a_diverging_worker_is_caught(pooled, monkeypatch):
    # the comparison above can fail: a worker that loses a completed collective changes the doc
    real = pool._pack

    def lossy(trace, members, new_members):
        for pg in trace.pgs.values():
            pg.done[:] = bytes(len(pg.done))
        return real(trace, members, new_members)

    monkeypatch.setattr(pool, "_pack", lossy)
    got = _doc([H200])
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 10 ** 9)
    assert got != _doc([H200])


def _many(tmp_path, n=12, odd=7):
    for r in range(n):
        es = [entry(1), entry(2, "broadcast" if r == odd else "all_reduce")]
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump(es, str(list(range(n))))))


def test_a_hostile_pickle_read_by_a_worker_is_refused_and_nothing_in_it_runs(
        tmp_path, pooled, capsys):
    _many(tmp_path)
    witness = tmp_path.parent / "ran"
    bomb = Boom()
    bomb.path = witness
    (tmp_path / "nccl_trace_rank_9").write_bytes(pickle.dumps(bomb))
    with pytest.raises(SystemExit) as exc:
        main(["diagnose", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert "nccl_trace_rank_9" in err and "refused" in err
    assert not witness.exists()
    # the refusal came from a worker (rank 9 is the last name: the others came before it)
    assert len(pooled) == 1 and pooled[0][-1] == "error" and set(pooled[0][:-1]) <= {"trace"}
    assert psutil.Process().children() == []


def test_a_worker_that_dies_leaves_its_dumps_to_this_process(tmp_path, pooled, monkeypatch):
    _many(tmp_path)
    real = pool._worker

    class Doomed:                                  # killed when it is given the sixth dump
        def __init__(self, tasks):
            self.tasks = tasks

        def recv(self):
            chunk = self.tasks.recv()
            if chunk and 5 in chunk:
                os.kill(os.getpid(), signal.SIGKILL)
            return chunk

    monkeypatch.setattr(pool, "_worker", lambda tasks, *args: real(Doomed(tasks), *args))
    got = _doc([tmp_path])
    assert len(pooled) == 1 and 0 < len(pooled[0]) < 12
    assert [(c["rank"], c["kind"]) for c in got["culprits"]] == [(7, "mismatch")]
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 10 ** 9)
    assert got == _doc([tmp_path])
    assert psutil.Process().children() == []


def test_an_interrupt_stops_and_reaps_the_workers(tmp_path, pooled, monkeypatch):
    _many(tmp_path)
    calls = []
    real = pool._Remote.take

    def take(self):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(pool._Remote, "take", take)
    with pytest.raises(KeyboardInterrupt):
        diagnose_files([str(tmp_path)])
    assert psutil.Process().children() == []


def test_unexpected_errors_in_a_worker_are_raised_as_one_process_raises_them(
        tmp_path, pooled, monkeypatch):
    _many(tmp_path)

    def boom(self, path, data, source=""):
        raise RuntimeError("a bug")

    monkeypatch.setattr(inputs.JobReader, "add_dump", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        diagnose_files([str(tmp_path)])
    assert psutil.Process().children() == []


def _sigint_as_in_a_terminal() -> None:
    """SIGINT's default action, as a command started from a terminal has it: a suite started in
    the background by a non-interactive shell (``cmd &``) has SIGINT ignored, every child inherits
    that, and Python then installs no KeyboardInterrupt handler (the test saw exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(parallel.cpus() < 2, reason="one CPU: no workers")
def test_ctrl_c_during_a_pooled_read_exits_130_and_leaves_no_process(tmp_path):
    # the real command, as README shows it: enough dumps for the pool, and slow enough to stop
    folder = tmp_path / "fr"
    folder.mkdir()
    es = [entry(s) for s in range(1, 2001)]
    (folder / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump(es, "[0]"), protocol=2))
    # 4,096 ranks (hard links: no disk): ~50 CPU-s of reading, still going when Ctrl-C comes
    for r in range(1, max(inputs.PARALLEL_MIN * 4, 4096)):
        os.link(folder / "nccl_trace_rank_0", folder / f"nccl_trace_rank_{r}")
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "diagnose", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_sigint_as_in_a_terminal)
    me = psutil.Process(proc.pid)
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
        workers = me.children()
        time.sleep(0.05)
    assert len(workers) >= 2, "the pool never started"
    os.killpg(proc.pid, signal.SIGINT)             # a terminal's Ctrl-C: the whole group
    _, err = proc.communicate(timeout=60)
    # click writes a newline first; no worker writes anything (no traceback)
    assert proc.returncode == 130 and err.strip() == "ncclcheck: interrupted", err
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    shutil.rmtree(folder)


@pytest.mark.parametrize("cpu_max, want", [("max 100000", 8), ("150000 100000", 2),
                                           ("50000 100000", 1), (None, 8)])
def test_workers_fit_the_cgroup_cpu_quota(tmp_path, monkeypatch, cpu_max, want):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/slurm/uid_0/job_7/step_0\n")
    if cpu_max:
        folder = tmp_path / "sys" / "fs" / "cgroup" / "slurm" / "uid_0" / "job_7" / "step_0"
        folder.mkdir(parents=True)
        (folder / "cpu.max").write_text(cpu_max + "\n")
    assert parallel.cpus(str(tmp_path)) == want


def test_a_worker_gone_after_its_refusal_is_given_nothing_more(tmp_path, pooled, monkeypatch):
    # the CI failure (exit 1, nothing said, 1 run in 10 on a loaded box): a worker sends its
    # refusal and returns while this process is still reading its earlier messages; handing
    # it the next chunk then raised BrokenPipeError. Made certain here: this process starts
    # reading only once the workers have sent all they were given.
    _many(tmp_path)
    bad = Path(inputs.expand([str(tmp_path)])[1])  # the first worker's second dump in flight
    bomb = Boom()
    bomb.path = tmp_path.parent / "ran"
    bad.write_bytes(pickle.dumps(bomb))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    real = pool._Remote.take
    slept = []

    def take(self):
        if not slept:
            slept.append(time.sleep(1.0))
        return real(self)

    monkeypatch.setattr(pool._Remote, "take", take)
    with pytest.raises(BadInput, match=f"{bad.name}: refused"):
        diagnose_files([str(tmp_path)])
    assert not bomb.path.exists()
    assert len(pooled) == 1 and pooled[0] == ["trace", "error"], pooled
    assert psutil.Process().children() == []
