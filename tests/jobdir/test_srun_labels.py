"""srun --label'd text without a job: a label is the rank only where srun started the ranks."""

from __future__ import annotations

from ncclcheck.jobdir.inputs import scan_text
from ncclcheck.jobdir.job import JobReader

STACK = ['{t}: Stack (most recent call first):',
         '{t}:   File "/job/train.py", line 65 in <module>']


def test_a_labelled_stack_goes_to_its_task_and_a_contradicting_label_attributes_nothing(tmp_path):
    # srun started the ranks: "3:" is rank 3 (its [rank3]: lines agree)
    same = ["3: [rank3]: starting", *(s.format(t=3) for s in STACK),
            "0: [rank0]: [../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 4000ms "
            "for recv operation to complete", "srun: error: node2: task 3: Terminated"]
    job = JobReader()
    (tmp_path / "a.out").write_text("\n".join(same) + "\n")
    scan_text(job, str(tmp_path / "a.out"))
    assert job.text.ranks[3].stack == ["/job/train.py:65 in <module>"]
    assert job.text.ranks[0].timed_out
    # srun started torchrun per node: task 1's lines hold [rank5]: -- labels are not ranks
    other = ["1: [rank5]: starting", *(s.format(t=1) for s in STACK)]
    job = JobReader()
    (tmp_path / "b.out").write_text("\n".join(other) + "\n")
    scan_text(job, str(tmp_path / "b.out"))
    assert 1 not in job.text.ranks and not job.text.ranks[5].stack


#: the head of ``srun -v -l`` (Slurm 22.05.8, recorded by tests/jobdir/test_slurm_faults.py)
VERBOSE = """srun: defined options
srun: -------------------- --------------------
srun: distribution        : plane=2
srun: job-name            : ncclcheck-skip-slurm-jobs0
srun: label               : set
srun: nodes               : 2
srun: ntasks              : 3
srun: verbose             : 1
srun: -------------------- --------------------
srun: end of defined options
srun: jobid 2: nodes(2):`node[1-2]', cpu counts: 2(x1),1(x1)
srun: launch/slurm: launch_p_step_launch: CpuBindType=(null type)
srun: launching StepId=2.0 on host node1, 2 tasks: [0-1]
srun: launching StepId=2.0 on host node2, 1 tasks: 2
srun: route/default: init: route default plugin loaded
srun: launch/slurm: _task_start: Node node1, 2 tasks started
srun: launch/slurm: _task_start: Node node2, 1 tasks started
""".splitlines()


def test_sruns_verbose_lines_place_each_task_and_leave_its_labels_read(tmp_path):
    # a dozen srun lines before the tasks' few: the file is still srun --label'd text
    job = JobReader()
    (tmp_path / "a.out").write_text("\n".join([*VERBOSE, *(s.format(t=1) for s in STACK)]) + "\n")
    scan_text(job, str(tmp_path / "a.out"))
    assert job.text.ranks[1].stack == ["/job/train.py:65 in <module>"]
    assert [job.text.launch.host(r, 3) for r in range(3)] == [
        ("node1", f"{tmp_path / 'a.out'}:13"), ("node1", f"{tmp_path / 'a.out'}:13"),
        ("node2", f"{tmp_path / 'a.out'}:14")]
    assert job.text.launch.host(2, 16) is None        # a step of 3 tasks: not a 16-rank job's
    # srun started torchrun per node (task 1's lines are rank 5's): tasks are not ranks
    job = JobReader()
    (tmp_path / "b.out").write_text("\n".join([*VERBOSE, "1: [rank5]: starting",
                                               *(s.format(t=1) for s in STACK)]) + "\n")
    scan_text(job, str(tmp_path / "b.out"))
    assert job.text.launch.host(1, None) is None
