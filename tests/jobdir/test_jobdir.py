"""The job-folder reader without running a job: restricted unpickling, dumps, torchrun/srun text."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.envformat import parse_env_text
from ncclcheck.jobdir.fr import Intern, load_bytes, parse_dump
from ncclcheck.jobdir.text import JobText, TextScanner

NCCLCHECK = [sys.executable, "-m", "ncclcheck"]
FIXTURES = Path(__file__).parent.parent / "fixtures"


def entry(seq, op="all_reduce", size=8, state="scheduled", backend="gloo", **kw):
    e = {"record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
         "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
         "profiling_name": f"{backend}:{op}", "input_sizes": [[size]], "input_dtypes": ["Float"],
         "output_sizes": [[size]], "output_dtypes": ["Float"], "state": state, "retired": True,
         "timeout_ms": 3000, "time_created_ns": 1, "time_discovered_started_ns": None,
         "time_discovered_completed_ns": None, "is_p2p": False,
         "frames": [{"name": "<module>", "filename": "train.py", "line": 10 + seq}]}
    e.update(kw)
    return e


def dump(entries, ranks="[0, 1, 2]"):
    # gloo in torch 2.13 writes pg_config under an empty name
    return {"version": "2.10", "comm_lib_version": "", "entries": entries,
            "pg_config": {"": {"name": "", "desc": "", "ranks": ranks}},
            "pg_status": {"0": {"last_enqueued_collective": len(entries),
                                "last_started_collective": -1,
                                "last_completed_collective": len(entries)}}}


class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_naming_a_callable_is_refused_and_nothing_runs(tmp_path):
    witness = tmp_path / "ran"
    bomb = Boom()
    bomb.path = witness
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(bomb))
    out = subprocess.run([*NCCLCHECK, "diagnose", str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "nccl_trace_rank_0" in out.stderr
    assert "refused" in out.stderr and "posix.system" in out.stderr
    assert not witness.exists()
    assert pickle.loads(pickle.dumps(bomb)) == 0 and witness.exists()   # the test can fail


def test_pickle_and_json_dumps_read_alike_and_gloo_empty_pg_name_is_tolerated(tmp_path):
    d = dump([entry(1), entry(2)])
    a = parse_dump(load_bytes(pickle.dumps(d)), "x/nccl_trace_rank_3", Intern(), Intern())
    b = parse_dump(load_bytes(json.dumps(d).encode()), "x/fr_3.json", Intern(), Intern())
    assert (a.rank, b.rank) == (3, 3)
    assert a.pgs["0"].members == (0, 1, 2) and a.pgs["0"].last == b.pgs["0"].last == 2


def write(tmp_path, per_rank):
    for r, entries in per_rank.items():
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump(entries)))


def test_a_mismatch_in_dumps_names_the_odd_rank(tmp_path):
    write(tmp_path, {0: [entry(1), entry(2)], 1: [entry(1), entry(2, "broadcast")],
                     2: [entry(1), entry(2)]})
    doc = diagnose_files([str(tmp_path)])
    assert [(c["rank"], c["kind"]) for c in doc["culprits"]] == [(1, "mismatch")]
    assert doc["first_desync"]["seq"] == 2 and doc["first_desync"]["op"] == "all_reduce"


def test_a_rank_without_a_dump_and_no_exit_is_missing_and_agreeing_dumps_name_no_one(tmp_path):
    write(tmp_path, {0: [entry(1)], 1: [entry(1)], 2: [entry(1)]})
    assert diagnose_files([str(tmp_path)])["culprits"] == []
    (tmp_path / "nccl_trace_rank_2").unlink()
    doc = diagnose_files([str(tmp_path)])
    assert [(c["rank"], c["kind"]) for c in doc["culprits"]] == [(2, "missing")]


def nccl(seq, wait_ms, state="completed"):
    return entry(seq, backend="nccl", state=state, time_discovered_started_ns=10**9,
                 time_discovered_completed_ns=10**9 + int(wait_ms * 1e6))


def test_nccl_everyone_entered_nothing_completed_is_the_network(tmp_path):
    write(tmp_path, {r: [nccl(1, 5), nccl(2, 0, state="started")] for r in range(3)})
    doc = diagnose_files([str(tmp_path)])
    assert doc["culprits"] == [] and doc["job"]["class"] == "network"
    assert "ncclcheck bench --pairwise --hostfile" in doc["job"]["pairwise"]


def test_nccl_timings_name_the_straggler_the_others_waited_for(tmp_path):
    write(tmp_path, {r: [nccl(s, 2 if r == 1 else 400) for s in range(1, 6)] for r in range(4)})
    doc = diagnose_files([str(tmp_path)])
    assert [(c["rank"], c["kind"]) for c in doc["culprits"]] == [(1, "straggler")]


SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_15:21:59
  host      : node0
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 12919)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 12919
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_15:21:59
  host      : node1
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 12920)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 12920
============================================================
srun: error: node1: task 1: Exited with exit code 1
srun: error: node2: tasks 4-5: Killed
"""


def test_torchrun_summary_and_srun_lines_map_ranks_to_hosts():
    job = JobText()
    s = TextScanner(job, "job.log")
    for i, line in enumerate(SUMMARY.splitlines(), 1):
        s.feed(line, i)
    s.close()
    r3 = job.ranks[3]
    assert (r3.host, r3.local_rank, r3.exitcode, r3.pid, r3.signal, r3.root_cause) == \
        ("node1", 1, -9, 12920, "SIGKILL", True)
    assert (job.ranks[0].host, job.ranks[0].exitcode, job.ranks[0].root_cause) == \
        ("node0", -15, False)
    assert job.srun_tasks[1][:3] == ("node1", "Exited with exit code 1", 1)
    assert job.srun_tasks[5][0] == "node2" and job.srun_tasks[5][3] == "SIGKILL"


TEE = """\
[default1]:Stack (most recent call first):
[default1]:  File "/job/train.py", line 62 in <module>
[default{l0}]:[rank{r0}]: Traceback (most recent call last):
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_15:21:59
  host      : node2
  rank      : {r0} (local_rank: {l0})
  exitcode  : 1 (pid: 12919)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
[1]:
  time      : 2026-11-26_15:21:59
  host      : node2
  rank      : 5 (local_rank: 1)
  exitcode  : -15 (pid: 12920)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 12920
"""


@pytest.mark.parametrize("r0, l0, owner", [(4, 0, 5), (1, 1, None)])
def test_tee_headers_give_a_local_rank_and_its_stack_goes_to_the_one_global_rank(r0, l0, owner):
    # torchrun --tee 3: "[default<local rank>]:" (tail_log.py); faulthandler writes no [rankN]:
    job = JobText()
    s = TextScanner(job, "torchrun.log")
    for i, line in enumerate(TEE.format(r0=r0, l0=l0).splitlines(), 1):
        s.feed(line, i)
    s.close()
    job.resolve()
    assert job.ranks[r0].local_rank == l0 and job.ranks[5].local_rank == 1
    stacked = [r for r, t in job.ranks.items() if t.stack]
    if owner is None:   # ranks 1 and 5 are both local rank 1 (two nodes): whose stack is unknown
        assert stacked == []
    else:
        assert stacked == [owner] and job.ranks[owner].stack == ["/job/train.py:62 in <module>"]
        assert job.ranks[owner].stack_evidence == "torchrun.log:1"


def test_report_draws_each_ranks_progress_with_the_culprit_marked(tmp_path):
    write(tmp_path, {0: [entry(1), entry(2)], 1: [entry(1)], 2: [entry(1), entry(2)]})
    doc_path = tmp_path / "diag.json"
    out = subprocess.run([*NCCLCHECK, "diagnose", str(tmp_path), "-o", str(doc_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    md = subprocess.run([*NCCLCHECK, "report", str(doc_path), "--format", "md"],
                        capture_output=True, text=True, timeout=60).stdout
    bars = [ln for ln in md.splitlines() if ln.startswith("rank ")]
    assert len(bars) == 3 and bars[1].endswith("<- missing") and "<-" not in bars[0] + bars[2]


def _explainable(args: list[str]) -> tuple[str, list[str]]:
    out = subprocess.run([*NCCLCHECK, "recommend", "-q", *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode in (0, 3), out.stderr
    text = out.stdout
    start = text.index("# --- make the next hang explainable")
    section = text[start:text.index("# --- end of the explainable-hang section ---")]
    return text, section.splitlines()


@pytest.mark.parametrize("host, ras", [("h100-ib-8gpu", False), ("ras-default", True)])
def test_recommend_writes_a_droppable_section_that_makes_the_next_hang_explainable(
        tmp_path, host, ras):
    # recorded facts: NCCL 2.21.5 (no RAS) and 2.26.2 (RAS from 2.24)
    facts = next(d for d in json.loads((FIXTURES / "facts" / "nccl-ras-diagnostics.pass.json")
                                       .read_text()) if d["hostname"] == host)
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    text, section = _explainable(["--probe", str(tmp_path / "facts.json"),
                                  "--dump-dir", "/shared/hang"])
    set_here = [ln for ln in section if not ln.startswith("#")]
    assert set_here[:3] == ["TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
                            "TORCH_NCCL_ENABLE_MONITORING=1"]
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/hang/nccl_trace_rank_" in set_here
    assert "NCCL_DEBUG_FILE=/shared/hang/nccl.%h.%p.log" in set_here
    assert ("NCCL_RAS_ENABLE=1" in set_here) is ras
    if not ras:
        assert any("needs NCCL >= 2.24" in ln and "2.21.5" in ln for ln in section)
    # each setting comes after its reason, which says where it starts
    for i, ln in enumerate(section):
        if not ln.startswith("#"):
            assert section[i - 1].startswith("#") and " on." in section[i - 1], ln
    # the section is the file's end: dropped, the rules' lines are all that is left
    assert text.rstrip().endswith("# --- end of the explainable-hang section ---")
    # every line of the file, the section included, reads back as the env file
    env = parse_env_text(text)
    assert env["NCCL_DEBUG_FILE"] == "/shared/hang/nccl.%h.%p.log"


def test_recommend_without_a_dump_dir_leaves_only_the_paths_commented():
    _, section = _explainable([])
    set_here = [ln for ln in section if not ln.startswith("#")]
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in set_here
    assert not any("DEBUG_INFO_TEMP_FILE" in ln or "DEBUG_FILE=" in ln for ln in set_here)
    assert any(ln.startswith("# NCCL_DEBUG_FILE=") and "--dump-dir" in ln for ln in section)


@pytest.mark.parametrize("dump_dir", [None, "/shared/hang"])
def test_recommends_json_holds_the_section_its_env_text_is_written_from(tmp_path, dump_dir):
    from ncclcheck import schema

    # recorded facts: NCCL 2.21.5 (RAS left out) and a rule-set variable would keep its value
    facts = next(d for d in json.loads((FIXTURES / "facts" / "nccl-ras-diagnostics.pass.json")
                                       .read_text()) if d["hostname"] == "h100-ib-8gpu")
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    args = ["--probe", str(tmp_path / "facts.json")] + (["--dump-dir", dump_dir] if dump_dir
                                                        else [])
    out = subprocess.run([*NCCLCHECK, "recommend", "-q", "--format", "json", *args],
                         capture_output=True, text=True, timeout=120)
    doc = schema.check(json.loads(out.stdout), "recommend --format json")
    section = doc["explainable_hang"]
    assert section["dump_dir"] == dump_dir and section["oldest_nccl"] == "2.21.5"
    states = {s["variable"]: s["state"] for s in section["settings"]}
    assert states["NCCL_RAS_ENABLE"] == "needs NCCL >= 2.24"
    assert states["NCCL_DEBUG_FILE"] == ("set" if dump_dir else "needs --dump-dir")
    assert all(s["since"] and s["reason"] for s in section["settings"])
    # the env text says the same: each "set" setting, after its reason, and nothing else
    _, lines = _explainable(args)
    written = [ln for ln in lines if not ln.startswith("#")]
    assert written == [f"{s['variable']}={s['value']}" for s in section["settings"]
                       if s["state"] == "set"]
    for s in section["settings"]:
        if s["state"] == "set":
            i = j = lines.index(f"{s['variable']}={s['value']}")
            while lines[j - 1].startswith("# ") and "=" not in lines[j - 1].split()[1] \
                    and not lines[j - 1].startswith(("# ---", "# then, after")):
                j -= 1
            said = " ".join(ln[2:] for ln in lines[j:i])
            assert said == f"{s['reason']}. From {s['since']} on.", said


def test_recommend_refuses_a_dump_dir_it_cannot_write_into_an_env_file():
    out = subprocess.run([*NCCLCHECK, "recommend", "-q", "--dump-dir", "/shared/my hang"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--dump-dir" in out.stderr


def test_many_dumps_read_by_worker_processes_give_the_verdict_of_one_process(tmp_path,
                                                                           monkeypatch):
    import ncclcheck.jobdir.inputs as inputs

    ranks = max(inputs.PARALLEL_MIN + 32, 96)
    base = [entry(1), entry(2, "all_gather", 4), entry(3)]
    for r in range(ranks):
        # rank 77 calls broadcast at #3: a signature one worker meets first, the others never
        es = base[:2] + [entry(3, "broadcast")] if r == 77 else base
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(
            pickle.dumps(dump(es, str(list(range(ranks))))))
    import ncclcheck.diagnose as diagnose

    ahead = []

    def spy(job, paths):
        inputs.prefetch(job, paths)
        ahead.append(len(job.prefetched))

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(diagnose, "prefetch", spy)
    forked = diagnose_files([str(tmp_path)])
    assert ahead == [ranks]                          # every dump was read by a worker
    monkeypatch.setattr(inputs, "PARALLEL_MIN", 10 ** 9)
    alone = diagnose_files([str(tmp_path)])
    assert [(c["rank"], c["kind"]) for c in forked["culprits"]] == [(77, "mismatch")]
    for key in ("culprits", "first_desync", "progress", "job"):
        assert forked[key] == alone[key], key


def test_a_malicious_pickle_among_many_dumps_is_refused_by_the_workers_too(tmp_path):
    from ncclcheck.jobdir.inputs import PARALLEL_MIN

    for r in range(PARALLEL_MIN + 8):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump([entry(1)])))
    witness = tmp_path.parent / "ran"
    bomb = Boom()
    bomb.path = witness
    (tmp_path / "nccl_trace_rank_50").write_bytes(pickle.dumps(bomb))
    out = subprocess.run([*NCCLCHECK, "diagnose", str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "nccl_trace_rank_50" in out.stderr and "refused" in out.stderr
    assert not witness.exists()
