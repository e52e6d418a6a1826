"""Gloo jobs under Slurm across two namespace nodes, one planted fault each at the fifth
collective, every fault of tests/jobdir/fault_job.py and a job that finishes. srun starts the 3
ranks (ranks 0 and 1 on node1, rank 2 on node2) and labels their lines (``srun -l``). A rank that
sleeps is ended, once its peers have timed out and exited, by ``scancel --signal=TERM`` as one
ends a hung job (its handler prints its stack and writes its dump, as NCCL's dump-on-timeout
would; ``srun -W`` would SIGKILL it). ``diagnose`` names exactly the planted rank, with its kind
and node (the rank that skips one and exits 0 is in no srun error line: its job runs with
``srun -v``, whose launch lines place every task). The jobs are independent: they run side by side once per module (the partition takes
several jobs per core, ``SLURM_JOBS_PER_CORE``); each test reads what they left. (One job with
two faults is not exact: the peers of a sleeping rank hang until srun kills them, and leave no
dump.) torchrun's own artifacts (Root Cause, --log-dir): tests/jobdir/test_planted_faults.py."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import needs_netns
from netns_cluster import make_cluster, slurm_cluster  # noqa: F401  (module-scoped fixtures)

pytest.importorskip("torch")
pytestmark = [pytest.mark.alone, pytest.mark.netns, pytest.mark.slow, pytest.mark.torch, needs_netns]

JOB = Path(__file__).with_name("fault_job.py")
NCCLCHECK = str(Path(sys.executable).parent / "ncclcheck")
SLURM_JOBS_PER_CORE = 8            # the slurm_cluster fixture: the jobs below run side by side
RANKS = 3
NODE = {0: "node1", 1: "node1", 2: "node2"}      # srun -N2 -n3 -m plane=2 (srun(1))
#: fault -> (planted rank, the kind diagnose must name): both nodes get planted faults
PLANTED = {"skip": (2, "missing"), "sleep": (1, "stuck"), "exit": (2, "dead"),
           "sigkill": (2, "dead"), "sigsegv": (1, "dead"), "other": (2, "mismatch"),
           "size": (1, "mismatch")}
KILLED, SLEEPER = PLANTED["sigkill"][0], PLANTED["sleep"][0]
#: srun -v logs each node's tasks (``srun: launching StepId=J.0 on host node2, 1 tasks: 2``): the
#: line diagnose places a rank by when it exits 0 without a word (srun's error lines name failed
#: tasks only); the other jobs run as plain ``srun -l``, their nodes known from srun's error lines
VERBOSE = {"skip": ["-v"]}
#: the jobs whose call stacks the tests read write torch's pickle (with stacks); the others
#: torch's JSON dump (fault_job.py FR_DUMP: no stacks to symbolise, ~2.5 CPU-s less per rank)
STACKS = ("other", "size")


def exited(text: str) -> set[int]:
    """The tasks srun reports exited: it writes one line per task or per range of tasks.

    >>> sorted(exited("srun: error: node1: task 0: Exited with exit code 1\\n"
    ...               "srun: error: node2: tasks 2-3: Exited with exit code 1\\n"))
    [0, 2, 3]
    """
    tasks: set[int] = set()
    for spec in re.findall(r"tasks? ([\d,-]+): Exited", text):
        for part in spec.split(","):
            first, _, last = part.partition("-")
            tasks.update(range(int(first), int(last or first) + 1))
    return tasks


def run(c, env, out: Path, fault: str, rank: int, port: int) -> Path:
    out.mkdir()
    job_env = {**env, "FAULT": fault, "FAULT_RANK": str(rank), "COLL_TIMEOUT": "4",
               "MASTER_ADDR": c.nodes[0].addr, "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "GLOO_SOCKET_IFNAME": "eth0",
               "TORCH_FR_DUMP_TEMP_FILE": str(out / "nccl_trace_rank_"),
               "FR_DUMP": "pickle" if fault in STACKS else "json"}
    name = f"ncclcheck-{fault}-{out.parent.name}"
    with open(out / "slurm.out", "wb") as log:
        srun = subprocess.Popen(["srun", "-J", name, *VERBOSE.get(fault, ()), "-N2",
                                 f"-n{RANKS}", "-m", "plane=2", "-l", sys.executable, str(JOB)],
                                env=job_env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            if fault == "sleep":
                # the others time out and exit; then the job is ended as one ends a hung job
                # (scancel's SIGTERM to its steps; srun -W would SIGKILL the step)
                deadline = time.monotonic() + 200
                while srun.poll() is None and time.monotonic() < deadline and len(
                        exited((out / "slurm.out").read_text(errors="replace"))) < RANKS - 1:
                    time.sleep(0.5)
                subprocess.run(["scancel", "--signal=TERM", "--name", name], env=env,
                               timeout=30, check=False)
            srun.wait(timeout=280)
        finally:
            if srun.poll() is None:
                srun.kill()
                srun.wait()
    diagnose(out)           # while the other jobs still run: the tests read the kept document
    return out


@pytest.fixture(scope="module")
def jobs(slurm_cluster, tmp_path_factory):
    """Every fault's job, and one with none, side by side: fault -> its folder."""
    c, env = slurm_cluster
    base = tmp_path_factory.mktemp("slurm-jobs")
    plan = {"none": -1, **{f: r for f, (r, _) in PLANTED.items()}}
    with ThreadPoolExecutor(len(plan)) as pool:
        done = {f: pool.submit(run, c, env, base / f, f, r, 29533 + i)
                for i, (f, r) in enumerate(plan.items())}
        return c, {f: d.result() for f, d in done.items()}


@functools.lru_cache(maxsize=None)
def diagnose(folder: Path) -> dict:
    out = subprocess.run([NCCLCHECK, "diagnose", str(folder), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def culprits(doc: dict) -> dict[int, dict]:
    return {c["rank"]: c for c in doc["culprits"]}


def named(out: Path) -> tuple[dict, list]:
    doc = diagnose(out)
    return doc, [(x["rank"], x["kind"], x["host"]) for x in doc["culprits"]]


def test_a_finished_job_names_no_one(jobs):
    _, out = jobs
    doc = diagnose(out["none"])
    assert doc["culprits"] == [] and doc["first_desync"] is None, (out["none"] / "slurm.out"
                                                                    ).read_text()[-3000:]
    assert doc["job"]["class"] == "none"
    assert doc["summary"]["verdict"].startswith("no rank at fault")


@pytest.mark.parametrize("fault", PLANTED)
def test_the_planted_rank_is_named_with_its_kind_and_its_node(jobs, fault):
    _, out = jobs
    rank, kind = PLANTED[fault]
    doc, found = named(out[fault])
    assert found == [(rank, kind, NODE[rank])], (out[fault] / "slurm.out").read_text()[-3000:]
    assert {f.read_bytes()[:1] for f in out[fault].glob("nccl_trace_rank_*")} == {
        b"\x80" if fault in STACKS else b"{"}
    assert doc["culprits"][0]["evidence"]
    assert doc["first_desync"]["seq"] == 5 and doc["first_desync"]["pg"] == "0"
    assert doc["summary"]["verdict"].startswith("all_reduce #5")


def test_dead_ranks_show_their_exit_as_srun_reports_it(jobs):
    _, out = jobs
    exits = {f: culprits(diagnose(out[f]))[PLANTED[f][0]]["exit"]
             for f in ("exit", "sigkill", "sigsegv")}
    assert {f: (e["exitcode"], e["signal"]) for f, e in exits.items()} == {
        "exit": (3, None), "sigkill": (None, "SIGKILL"), "sigsegv": (None, "SIGSEGV")}
    assert all(e["evidence"].split(":")[0].endswith("slurm.out") for e in exits.values())
    assert "SIGSEGV" in diagnose(out["sigsegv"])["job"]["next_step"]


def test_a_sleeping_rank_shows_its_stack_through_sruns_label(jobs):
    _, out = jobs
    doc = diagnose(out["sleep"])
    # stuck, not missing: it never entered #5 and its own stack shows where it waited (as under
    # torchrun); that stack has no [rank1]: prefix, only srun's "1: " label says whose it is
    sleep = next(i for i, ln in enumerate(JOB.read_text().splitlines(), 1) if "time.sleep" in ln)
    assert f"fault_job.py:{sleep} in <module>" in " ".join(doc["job"]["stacks"][f"rank {SLEEPER}"])


def test_srun_labels_give_the_killed_rank_its_own_last_lines(jobs):
    out = jobs[1]["sigkill"]
    text = (out / "slurm.out").read_text(errors="replace").splitlines()
    # what the killed rank printed itself carries no [rank3]: prefix, only srun's label
    own = [(n, ln[len(f"{KILLED}: "):].rstrip()) for n, ln in enumerate(text, 1)
           if ln.startswith(f"{KILLED}: ") and ln[len(f"{KILLED}: "):].strip()]
    assert own and not any(t.startswith("[rank") for _, t in own)
    last = culprits(diagnose(out))[KILLED]["last_lines"]
    assert [re.sub(r"^.*slurm\.out:(\d+): ", r"\1|", ln) for ln in last] == \
        [f"{n}|{t[:300]}" for n, t in own[-len(last):]] and len(last) == min(len(own), 6)


def test_a_killed_rank_known_only_by_the_closed_connection_its_peers_saw_is_dead(jobs, tmp_path):
    c, out = jobs[0], jobs[1]["sigkill"]
    # the ranks' own output, as `srun -o task-%t.out` keeps it: srun's own lines ("srun: error:
    # node2: task 3: Killed") went to the terminal; only gloo's "Connection closed (or reset) by peer
    # [addr]:port" in a peer's output says rank 3 ended
    for f in out.glob("nccl_trace_rank_*"):
        shutil.copy(f, tmp_path / f.name)
    lines = (out / "slurm.out").read_text(errors="replace").splitlines(keepends=True)
    (tmp_path / "tasks.out").write_text("".join(ln for ln in lines if not ln.startswith("srun:")))
    closed = [ln for ln in lines if f"Connection closed by peer [{c.nodes[1].addr}]" in ln
              or f"Read error [{c.nodes[1].addr}]" in ln]
    assert closed, "".join(lines[-40:])
    found = culprits(diagnose(tmp_path))
    assert found[KILLED]["kind"] == "dead", found
    assert found[KILLED]["host"] == c.nodes[1].addr
    at = found[KILLED]["evidence"][0]
    assert "tasks.out:" in at
    kept = (tmp_path / "tasks.out").read_text().splitlines()
    assert f"[{c.nodes[1].addr}]" in kept[int(at.rsplit(":", 1)[1]) - 1]


def test_a_rank_that_exited_quietly_is_placed_by_sruns_launch_lines_alone(jobs, tmp_path):
    _, out = jobs
    rank = PLANTED["skip"][0]
    c = culprits(diagnose(out["skip"]))[rank]
    text = (out["skip"] / "slurm.out").read_text(errors="replace").splitlines(keepends=True)
    at = int(c["evidence"][-1].rsplit(":", 1)[1])
    assert text[at - 1].startswith("srun: launching ") and f"host {NODE[rank]}," in text[at - 1]
    # the rank exited 0 and printed nothing: without srun -v's lines nothing in the folder tells
    # its node, and diagnose names none rather than guess
    for f in out["skip"].glob("nccl_trace_rank_*"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "slurm.out").write_text("".join(ln for ln in text
                                                if not ln.startswith("srun: launching ")))
    without = diagnose(tmp_path)
    assert [(x["rank"], x["kind"], x["host"]) for x in without["culprits"]] == [
        (rank, "missing", None)]
    # ... and says which artifact would
    assert f"node of rank {rank}: run srun with -v" in without["job"]["next_step"]
    assert "srun with -v" not in diagnose(out["skip"])["job"]["next_step"]
