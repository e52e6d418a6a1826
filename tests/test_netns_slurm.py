"""scripts/netns_slurm.py's own helpers, without a cluster."""

from __future__ import annotations

import os
import threading

from netns_cluster import slurm


def test_a_pid_file_made_but_not_yet_written_is_waited_for(tmp_path):
    """slurmctld creates its pid file before it writes its pid: an empty file is read as not
    ready (the fresh-clone CI of stop 27 failed all 13 tests of test_slurm_faults at set-up
    with an IndexError here), and the pid is taken once written."""
    pid_file = tmp_path / "ctld.pid"
    pid_file.write_text("")
    timer = threading.Timer(0.3, lambda: pid_file.write_text(f"{os.getpid()}\n"))
    timer.start()
    try:
        assert slurm._wait_pidfile(pid_file, tmp_path / "ctld.log", "slurmctld", 10) == os.getpid()
    finally:
        timer.cancel()
