"""srun's launch lines (``srun -v``, or ``SLURM_DEBUG=1``): the node of every task of a step.

srun reports only the tasks that failed (``srun: error: node2: task 2: Exited ...``): a rank that
skipped a collective and exited 0 says nothing of where it ran. With ``-v`` srun logs, before a
step starts, one line per node with the task ids it launches there (Slurm's
src/api/step_launch.c, ``_print_launch_msg``: ``info("launching %ps on host %s, %u tasks: %s")``
from 20.11, ``"launching %u.%u on host ..."`` before; the task list is a ranged host list of the
ids). Recorded from ``srun -v -N2 -n3 -m plane=2 -l`` (Slurm 22.05.8,
tests/jobdir/test_slurm_faults.py)::

    srun: launching StepId=2.0 on host node1, 2 tasks: [0-1]
    srun: launching StepId=2.0 on host node2, 1 tasks: 2

The task is the rank where srun starts the ranks itself (torchrun's summary, or ``[rankN]:``
lines under other tasks' labels, say it does not: then no host is taken from here). A step whose
tasks do not number the job's ranks (a setup step, one torchrun per node), and a task that two
steps place on different nodes, give no host either: nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

_LAUNCH = re.compile(r"srun: launching (?:StepId=)?(\S+) on host ([\w.-]+), (\d+) tasks?: "
                     r"\[?([\d,\-]+)\]?\s*$")


def launch_line(line: str) -> Optional[tuple[str, str, list[int]]]:
    """``(step, host, task ids)`` of one srun launch line, else None.

    >>> launch_line("srun: launching StepId=2.0 on host node1, 2 tasks: [0-1]")
    ('2.0', 'node1', [0, 1])
    >>> launch_line("srun: launching 4242.1 on host gpu-07, 3 tasks: [8,10-11]")
    ('4242.1', 'gpu-07', [8, 10, 11])
    >>> launch_line("srun: launching StepId=4.0 on host node2, 1 tasks: 2")
    ('4.0', 'node2', [2])
    >>> launch_line("srun: error: node2: task 2: Exited with exit code 3") is None
    True
    """
    m = _LAUNCH.search(line)
    if not m:
        return None
    return m.group(1), m.group(2), task_ids(m.group(4))


def task_ids(spec: str) -> list[int]:
    """The task ids of srun's ranged list (its launch and error lines).

    >>> task_ids("[8,10-11]"), task_ids("2"), task_ids("-,3")
    ([8, 10, 11], [2], [3])
    """
    tasks: list[int] = []
    for part in spec.strip("[]").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (hi or lo).isdigit():
            tasks.extend(range(int(lo), int(hi or lo) + 1))
    return tasks


@dataclass
class SrunLaunch:
    """The launch lines of one job's text: per step, task -> (host, evidence)."""

    steps: dict[str, dict[int, tuple[str, str]]] = field(default_factory=dict)
    #: False once a labelled file shows a task whose lines are another rank's
    tasks_are_ranks: bool = True

    def feed(self, line: str, at: str) -> bool:
        """Take ``line`` (evidence ``at``) if it is a launch line; True when it was."""
        got = launch_line(line)
        if got is None:
            return False
        step, host, tasks = got
        self.steps.setdefault(step, {}).update((t, (host, at)) for t in tasks)
        return True

    def host(self, rank: int, world: Optional[int]) -> Optional[tuple[str, str]]:
        """``(host, evidence)`` of ``rank`` where every step that numbers the job's ranks
        (``world`` of them, when known) agrees on it; else None.

        >>> s = SrunLaunch()
        >>> _ = [s.feed(ln, f"slurm.out:{n}") for n, ln in enumerate((
        ...     "srun: launching StepId=4.0 on host node1, 2 tasks: [0-1]",
        ...     "srun: launching StepId=4.0 on host node2, 1 tasks: 2",
        ...     "srun: launching StepId=4.1 on host node1, 1 tasks: 0",
        ...     "srun: launching StepId=4.1 on host node2, 1 tasks: 1"), 1)]
        >>> s.host(2, 3), s.host(1, 3), s.host(1, None)
        (('node2', 'slurm.out:2'), ('node1', 'slurm.out:1'), None)
        """
        if not self.tasks_are_ranks:
            return None
        found = [tasks[rank] for tasks in self.steps.values()
                 if rank in tasks and (world is None or len(tasks) == world)]
        return found[0] if found and len({h for h, _ in found}) == 1 else None
