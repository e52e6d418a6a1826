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
