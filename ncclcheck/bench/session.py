"""One agent per hostfile node kept for many runs: ``tune``'s candidates.

A run over ssh (:func:`ncclcheck.bench.launch.run_multi_node`) costs, on every node and before
its first collective, two ssh connections (the hello, then the agent), two interpreters and one
import of torch: seconds per node. ``tune`` measures each candidate three times or more; its
runs share a :class:`Session` instead. Each node's agent starts once (``agent --serve`` under the
node's watchdog, whose deadline is the tune's budget), answers a hello before each run (a fresh
rendezvous port, the node's facts) and is given each run's spec. The ranks are new processes in
every run, forked by the agent from its one import of torch, so NCCL reads the candidate's
variables in each as it would in a run of its own.

A run that fails stops the session's agents (the run's :class:`~ncclcheck.bench.monitor.Monitor`
stops every agent, as for a one-run launch) and the next run starts a new session.
:meth:`Session.close` ends it: closing an agent's stdin makes its node's watchdog stop what is
left, and the ssh connection ends.
"""

from __future__ import annotations

import json
import queue
import time
from typing import Any, Callable, Optional

from ncclcheck.hostfile import Target, load_hostfile
from ncclcheck.remote.process import RemoteProcess, stop_together
from ncclcheck.remote.ssh import SSH

#: Seconds the agents may outlive the deadline they were started for (their watchdog's).
MARGIN_S = 30.0
#: Seconds :meth:`Session.close` waits for the nodes to stop their agents, all together.
CLOSE_WAIT_S = 5.0

Sink = Callable[[str], None]


class Session:
    """The agents of one hostfile's nodes, started on the first :meth:`hello` and kept until a
    run fails or :meth:`close`. ``deadline_s``: how long the agents may live (the caller's
    budget); each run's own deadline is its monitor's."""

    def __init__(self, hostfile: str, nodes: Optional[int], ssh: SSH, deadline_s: float) -> None:
        self.targets: list[Target] = load_hostfile(hostfile, nodes)
        self.ssh = ssh
        self.ends_at = time.monotonic() + deadline_s + MARGIN_S
        self.processes: list[RemoteProcess] = []
        self.answers: queue.Queue = queue.Queue()      # (node, hello event)
        self.out: list[Optional[Sink]] = []            # this run's monitor's, per node
        self.err: list[Optional[Sink]] = []
        self.starts = 0                                # sessions started (tests, the doc)

    def alive(self) -> bool:
        """Whether every node's agent is still there for another run."""
        return bool(self.processes) and all(p.poll() is None for p in self.processes)

    def _start(self) -> None:
        self.close()
        # this start's own queue and sinks: a closed agent's last lines (its drain thread
        # outlives close() a moment) reach the objects of its start, never the next one's
        n = len(self.targets)
        self.answers, self.out, self.err = queue.Queue(), [None] * n, [None] * n
        argv = [self.ssh.remote_python, "-m", "ncclcheck.bench.agent", "--serve"]
        deadline = max(1.0, self.ends_at - time.monotonic())
        try:
            for node, target in enumerate(self.targets):
                self.processes.append(self.ssh.start(
                    target, argv, deadline=deadline, stream=True,
                    on_stdout_line=self._stdout(node, self.answers, self.out),
                    on_stderr_line=self._stderr(node, self.err)))
        except BaseException:
            self.close()
            raise
        self.starts += 1

    @staticmethod
    def _stdout(node: int, answers: queue.Queue, out: list[Optional[Sink]]) -> Sink:
        def line(text: str) -> None:
            if text.startswith('{"ev": "hello"'):
                try:
                    answers.put((node, json.loads(text)))
                    return
                except ValueError:
                    pass
            sink = out[node]
            if sink is not None:
                sink(text)
        return line

    @staticmethod
    def _stderr(node: int, err: list[Optional[Sink]]) -> Sink:
        def line(text: str) -> None:
            sink = err[node]
            if sink is not None:
                sink(text)
        return line

    def hello(self, timeout: float) -> list[tuple[Optional[dict[str, Any]], Optional[str]]]:
        """Every node's hello (or None) and what went wrong there (or None), worded as the
        one-run launch words them (:meth:`RemoteProcess.result`); the session is started first
        when it is not alive, and closed when a node did not answer."""
        if not self.alive():
            self._start()
        answers = self.answers
        while not answers.empty():                    # a late answer of an earlier call
            answers.get_nowait()
        for process in self.processes:
            process.send(b'{"op": "hello"}\n')
        got: dict[int, dict[str, Any]] = {}
        end = time.monotonic() + timeout
        while len(got) < len(self.processes) and time.monotonic() < end:
            waiting = [p for n, p in enumerate(self.processes) if n not in got]
            if all(p.poll() is not None for p in waiting):
                time.sleep(0.2)                       # every one left has ended: its last lines
                while not answers.empty():
                    node, event = answers.get_nowait()
                    got[node] = event
                break
            try:
                node, event = answers.get(timeout=0.1)
                got[node] = event
            except queue.Empty:
                pass
        out: list[tuple[Optional[dict[str, Any]], Optional[str]]] = []
        for node, (target, process) in enumerate(zip(self.targets, self.processes)):
            if node in got:
                out.append((got[node], None))
            elif process.poll() is None:
                out.append((None, f"{target.label}: timed out after {timeout:g} s"))
            else:
                result = process.result(1.0)
                last = (result.stderr.strip().splitlines() or ["?"])[-1][:200]
                out.append((None, result.error
                            or f"{target.label}: no answer from the agent ({last})"))
        if len(got) < len(self.processes):
            self.close()
        return out

    def run(self, node: int, spec: dict[str, Any], out: Sink, err: Sink) -> RemoteProcess:
        """Give node ``node``'s agent a run's ``spec``; its lines go to ``out`` and ``err``."""
        self.out[node], self.err[node] = out, err
        self.processes[node].send(json.dumps({"op": "run", "spec": spec}).encode() + b"\n")
        return self.processes[node]

    def close(self) -> None:
        """Stop every agent of the session (their watchdogs stop what is left) and wait, at
        most :data:`CLOSE_WAIT_S` for all of them together, then stop what is left."""
        stop_together(self.processes, CLOSE_WAIT_S)
        self.processes = []
