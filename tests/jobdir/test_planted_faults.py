"""Real gloo jobs under torchrun, one planted fault each, diagnosed from what they leave behind:
every fault of tests/jobdir/fault_job.py, and a job that finishes, with what torchrun adds (its
failure summary with Root Cause, host, local rank, exit code and pid, and its ``--log-dir``
layout).

Each job is 3 ranks of tests/jobdir/fault_job.py (4 s collective timeout) in its own folder:
Flight Recorder dumps written by the job's handlers, and torchrun's output. A rank skips a
collective, sleeps before one (the job runs with torchrun's ``--log-dir`` and ``--redirects 3``:
its ranks' output is only in torchrun's own layout,
``logs/<run>_<random>/attempt_0/<local_rank>/stderr.log``), exits, is killed (SIGKILL, SIGSEGV:
torchrun's summary gives its signal), or calls another collective or another size (where
torchrun's Root Cause names another rank). The same faults run across nodes under Slurm:
tests/jobdir/test_slurm_faults.py. The 9 jobs run side by side once per module; each job's
folder is diagnosed as soon as it ends (``ncclcheck diagnose FOLDER --json`` as README shows),
and the tests read the kept documents.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.slow, pytest.mark.torch]

JOB = Path(__file__).with_name("fault_job.py")
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
NCCLCHECK = str(Path(sys.executable).parent / "ncclcheck")
#: fault -> the kind diagnose must name the planted rank with
PLANTED = {"skip": "missing", "sleep": "stuck", "exit": "dead", "sigkill": "dead",
           "sigsegv": "dead", "other": "mismatch", "size": "mismatch"}
FAULTS = ("none", *PLANTED)
TARGET = 1
#: the jobs whose call stacks the tests read write torch's pickle (with stacks); the others
#: torch's JSON dump (fault_job.py FR_DUMP: no stacks to symbolise, ~2.5 CPU-s less per rank)
STACKS = ("other", "size")
#: the jobs whose ranks write only to torchrun's --log-dir
LOG_DIR = {"sleep": ["--redirects", "3"]}


def run_job(folder: Path, fault: str) -> Path:
    folder.mkdir()
    (folder / "tmp").mkdir()
    # its own TMPDIR: this module-scoped fixture runs before conftest's per-test TMPDIR, and
    # torchrun leaves torchelastic_* (and torch torchinductor_*) folders in the TMPDIR it gets
    env = {**os.environ, "TMPDIR": str(folder / "tmp"), "FAULT": fault, "FAULT_RANK": str(TARGET), "COLL_TIMEOUT": "4",
           "TORCH_FR_DUMP_TEMP_FILE": str(folder / "nccl_trace_rank_"), "OMP_NUM_THREADS": "1",
           "FR_DUMP": "pickle" if fault in STACKS else "json"}
    with open(folder / "job.log", "wb") as log:
        logs = ["--log-dir", str(folder / "logs"), *LOG_DIR[fault]] if fault in LOG_DIR else []
        subprocess.run([TORCHRUN, "--standalone", "--nproc-per-node", "3", *logs, str(JOB)], env=env,
                       stdout=log, stderr=subprocess.STDOUT, timeout=240, check=False)
    diagnose(folder)        # while the other jobs still run: the tests read the kept document
    return folder


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    base = tmp_path_factory.mktemp("jobs")
    with ThreadPoolExecutor(len(FAULTS)) as pool:
        done = dict(zip(FAULTS, pool.map(lambda f: run_job(base / f, f), FAULTS)))
    return done


@functools.lru_cache(maxsize=None)
def diagnose(folder: Path) -> dict:
    out = subprocess.run([NCCLCHECK, "diagnose", str(folder), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def named(doc: dict) -> list[tuple[int, str]]:
    return [(c["rank"], c["kind"]) for c in doc["culprits"]]


def test_a_finished_job_names_no_one(jobs):
    doc = diagnose(jobs["none"])
    assert doc["culprits"] == [] and doc["first_desync"] is None, (jobs["none"] / "job.log"
                                                                    ).read_text()[-3000:]
    assert doc["job"]["class"] == "none"
    assert doc["summary"]["verdict"].startswith("no rank at fault")


@pytest.mark.parametrize("fault", PLANTED)
def test_the_planted_rank_is_named_with_its_kind(jobs, fault):
    doc = diagnose(jobs[fault])
    assert named(doc) == [(TARGET, PLANTED[fault])], json.dumps(doc["culprits"], indent=1) + (
        jobs[fault] / "job.log").read_text(errors="replace")[-3000:]
    # the dumps as the job wrote them: torch's pickle or its JSON
    assert {f.read_bytes()[:1] for f in jobs[fault].glob("nccl_trace_rank_*")} == {
        b"\x80" if fault in STACKS else b"{"}
    c = doc["culprits"][0]
    assert c["evidence"]
    if fault == "skip":
        # it exited 0 and printed nothing; torchrun's summary lists failed ranks only: no file
        # tells its host, local rank or pid, and diagnose invents none
        assert (c["host"], c["local_rank"], c["pid"]) == (None, None, None)
    else:
        assert c["host"] and c["local_rank"] == TARGET and c["pid"]
    assert doc["first_desync"]["seq"] == 5 and doc["first_desync"]["pg"] == "0"
    assert doc["summary"]["verdict"].startswith("all_reduce #5")


def test_dead_ranks_show_the_exit_torchrun_reports(jobs):
    exits = {f: diagnose(jobs[f])["culprits"][0]["exit"] for f in ("exit", "sigkill", "sigsegv")}
    assert {f: (e["exitcode"], e["signal"]) for f, e in exits.items()} == {
        "exit": (3, None), "sigkill": (-9, "SIGKILL"), "sigsegv": (-11, "SIGSEGV")}
    assert all(e["evidence"].split(":")[0].endswith("job.log") for e in exits.values())
    assert "SIGSEGV" in diagnose(jobs["sigsegv"])["job"]["next_step"]


@pytest.mark.parametrize("fault", STACKS)
def test_a_mismatch_shows_both_stacks_and_where_torchrun_disagrees(jobs, fault):
    doc = diagnose(jobs[fault])
    stacks = doc["job"]["stacks"]
    assert any("fault_job.py" in f for f in stacks[f"rank {TARGET}"])
    assert stacks[f"rank {TARGET}"] != stacks["the others"]
    root = [ln for ln in doc["job"]["disagreements"] if "Root Cause" in ln]
    # torchrun names the first rank it saw fail: usually a peer that timed out first (the
    # planted rank waits 3x longer), or one gloo aborted on receiving another size, but on a
    # busy machine now and then the planted rank itself; a disagreement is said exactly when
    # there is one, with the reason that fits the rank it names
    named = re.search(r"Root Cause.*?\n\s*rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)",
                      (jobs[fault] / "job.log").read_text(errors="replace"), re.S)
    assert named, "torchrun wrote no Root Cause"
    if int(named.group(1)) == TARGET:
        assert root == [], root
    else:
        assert len(root) == 1 and f"rank {named.group(1)}" in root[0], root
        assert f"rank {TARGET} " not in root[0].split(":")[0]
        aborted = int(named.group(2)) in (-6, 134)
        assert ("gloo aborted" in root[0]) == aborted, root
        assert ("timed out waiting" in root[0]) != aborted, root


def test_a_stuck_rank_shows_where_it_waited_from_torchruns_log_dir(jobs):
    folder = jobs["sleep"]
    # torchrun's own layout (torch/distributed/elastic/multiprocessing/api.py): the rank's
    # faulthandler stack, with no [rankN]: prefix, is only in its local rank's stderr.log
    logs = sorted(folder.glob("logs/*/attempt_0/*/stderr.log"))
    assert [p.parent.name for p in logs] == ["0", "1", "2"], sorted(folder.rglob("*"))
    assert "most recent call first" in logs[TARGET].read_text()
    assert "most recent call first" not in (folder / "job.log").read_text()
    doc = diagnose(folder)
    sleep = next(i for i, ln in enumerate(JOB.read_text().splitlines(), 1) if "time.sleep" in ln)
    assert f"fault_job.py:{sleep} in <module>" in " ".join(
        doc["job"]["stacks"][f"rank {TARGET}"]), doc["job"]["stacks"]
    c = doc["culprits"][0]
    assert any(f"attempt_0/{TARGET}/stderr.log:" in e for e in c["evidence"]), c["evidence"]


def test_text_output_leads_with_the_verdict(jobs):
    out = subprocess.run([NCCLCHECK, "diagnose", str(jobs["other"])], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
    first = next(ln for ln in out.stdout.splitlines() if ln.strip(" ─╭╮│"))
    assert "rank 1" in first and "mismatch" in first, out.stdout[:800]
