"""The launcher's watch over the agents (:class:`Monitor`): their event streams, the progress
bar, the stall backstop, and on failure the most likely cause (:class:`Failure`) and the stop of
every agent (see :mod:`ncclcheck.bench.launch`).
"""

from __future__ import annotations

import dataclasses
import json
import queue
import time
from typing import Any, Callable

from ncclcheck.bench.options import (
    CONSEQUENCE_RE,
    FAILURE_GRACE_S,
    STOP_WAIT_S,
    BenchOptions,
    Progress,
    run_deadline,
    stall_limit,
)
from ncclcheck.errors import NcclcheckError
from ncclcheck.remote.process import stop_together

#: Where a rank's rendezvous error names a firewall (:func:`ncclcheck.bench.meet.firewall_hint`).
HINT = ": a firewall on "


@dataclasses.dataclass
class Failure:
    """One thing that went wrong, ranked: lower ``priority`` is more likely the cause."""

    priority: int
    message: str
    node: int | None = None  #: the node it happened on, when known


class Monitor:
    """Collects the agents' events, drives the progress bar, and decides success or failure."""

    def __init__(self, opts: BenchOptions, progress: Progress, labels: list[str]) -> None:
        self.opts, self.progress, self.labels = opts, progress, labels
        self.processes: list[Any] = []
        self.events: queue.Queue = queue.Queue()
        self.result: dict[str, Any] | None = None
        self.done_nodes: set[int] = set()
        self.failed_nodes: set[int] = set()
        self.failures: list[Failure] = []
        self.stderr_tail: dict[int, list[str]] = {}
        self.reported: set[tuple[int, Any]] = set()
        self.log_dirs: dict[int, str] = {}
        self.pair_events: list[dict[str, Any]] = []  #: bench --pairwise: each rank's pairs
        self.ready = False
        #: a session's run (:mod:`ncclcheck.bench.session`): the agents stay after ``done``,
        #: and this run's deadline is kept here (their watchdogs' is the session's)
        self.kept = False
        self.deadline_s = run_deadline(opts)

    def line_handler(self, node: int) -> Callable[[str], None]:
        """A stdout callback for node ``node``'s agent (called on a drain thread)."""
        return lambda line: self.events.put((node, line))

    def stderr_handler(self, node: int) -> Callable[[str], None]:
        """A stderr callback: keep the last lines for error messages."""
        def keep(line: str) -> None:
            tail = self.stderr_tail.setdefault(node, [])
            if line.strip():
                tail.append(line.strip())
                del tail[:-20]
        return keep

    def name(self, node: int | None, event: dict[str, Any] | None = None) -> str:
        """How to name where something happened: the rank and the node's hostfile label."""
        where = self.labels[node] if node is not None and node < len(self.labels) else "?"
        if event and event.get("rank") is not None:
            return f"rank {event['rank']} on {where}"
        return where

    def handle(self, node: int, line: str) -> None:
        """One line from an agent."""
        if not line.startswith("{"):
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        kind = event.get("ev")
        if event.get("log_dir") and kind in ("started", "error", "rank_exit"):
            self.log_dirs.setdefault(node, event["log_dir"])  # kept by agents that fail
        if kind == "ready":
            self.ready = True
            self.progress.start(event.get("sizes", len(self.opts.sizes)))
        elif kind == "progress":
            self.progress.update(event.get("done", 0), event.get("row", {}))
        elif kind == "result":
            self.result = event.get("doc")
        elif kind == "done":
            self.done_nodes.add(node)
        elif kind == "pair":
            self.pair_events.append(event)
        elif kind == "beat" and "round" in event and hasattr(self.progress, "round"):
            self.progress.round(event)
        elif kind == "error":
            self.failed_nodes.add(node)
            self.reported.add((node, event.get("rank")))
            message = event.get("message", "failed")
            warn = "; ".join(event.get("nccl_warn") or [])
            text = f"{self.name(node, event)}: {message}" + (f" (NCCL WARN: {warn})" if warn else "")
            if HINT in message:  # a firewall named: rank 0's own store first, then the others'
                priority = 1 if event.get("rank") == 0 else 2
            else:
                priority = 3 if CONSEQUENCE_RE.search(message) else 2
            self.failures.append(Failure(priority, text, node))
        elif kind == "rank_exit":
            self.failed_nodes.add(node)
            if (node, event.get("rank")) in self.reported:
                return  # the rank already said why
            code = int(event.get("code", 1))
            how = (f"killed by signal {-code}" if code < 0 else f"exited with code {code}")
            tail = (event.get("stderr_tail") or [""])[-1][:300]
            warn = "; ".join(event.get("nccl_warn") or [])
            text = (f"{self.name(node, event)}: rank process {how}"
                    + (f": {tail}" if tail else "") + (f" (NCCL WARN: {warn})" if warn else ""))
            self.failures.append(Failure(1 if code < 0 else 4, text, node))

    def agent_ended(self, node: int, code: int) -> None:
        """Agent ``node`` exited with ``code``."""
        from ncclcheck.remote.quoting import ssh_failure

        if code == 0 and node in self.done_nodes:
            return
        stderr = self.processes[node].stderr.text() if self.processes else ""
        label = self.labels[node]
        if code == 255:
            text = ssh_failure(label, stderr)
        elif code == 124 and self.kept:
            text = f"{label}: stopped by the remote deadline of the agents' session"
        elif code == 124:
            text = f"{label}: stopped by the remote deadline ({self.deadline_s:g} s)"
        elif code >= 128:
            text = f"{label}: agent killed by signal {code - 128} (exit {code})"
        elif code < 0:
            text = f"{label}: agent killed by signal {-code}"
        else:
            last = (self.stderr_tail.get(node) or [""])[-1][:300]
            text = f"{label}: agent exited with code {code}" + (f": {last}" if last else "")
        if node not in self.failed_nodes:  # else its ranks' reports already say why
            self.failures.append(Failure(0, text, node))

    def wait(self) -> dict[str, Any]:
        """Watch until every agent is done (the document) or something failed (raise)."""
        last_event = started = time.monotonic()
        ended: set[int] = set()
        first_failure: float | None = None
        finished = False
        try:
            while True:
                try:
                    node, line = self.events.get(timeout=0.1)
                    self.handle(node, line)
                    last_event = time.monotonic()
                    continue_draining = True
                except queue.Empty:
                    continue_draining = False
                for node, process in enumerate(self.processes):
                    if node in ended:
                        continue
                    code = process.poll()
                    if code is not None and (process.stdout.closed or code != 0):
                        process.stdout.wait_for(r"(?!)", 0.5)  # its last lines, if any
                        self.drain()
                        ended.add(node)
                        self.agent_ended(node, code)
                now = time.monotonic()
                if self.failures and first_failure is None:
                    first_failure = now
                if first_failure is not None:
                    if now - first_failure >= FAILURE_GRACE_S or len(ended) == len(self.processes):
                        raise NcclcheckError(self.failure_message())
                    continue
                everyone = ended if not self.kept else self.done_nodes
                if len(everyone) == len(self.processes) and self.processes:
                    if self.result is None:
                        raise NcclcheckError("rank 0 ended without a result "
                                             f"({'; '.join(self.stderr_tail.get(0, [])[-2:])})")
                    finished = True
                    return self.result
                if self.kept and now - started > self.deadline_s:
                    self.failures.append(Failure(0, f"stopped at the run's deadline "
                                                    f"({self.deadline_s:g} s)"))
                    raise NcclcheckError(self.failure_message())
                if continue_draining:
                    continue
                limit = (stall_limit(self.opts) if self.ready
                         else self.opts.timeout + self.opts.connect_timeout + 60)
                if now - last_event > limit:
                    phase = "the sweep" if self.ready else "start-up and rendezvous"
                    self.failures.append(Failure(6, f"no progress for {now - last_event:.0f} s "
                                                    f"during {phase} (--timeout "
                                                    f"{self.opts.timeout:g} per collective)"))
                    raise NcclcheckError(self.failure_message())
        finally:
            self.progress.stop()
            if not (finished and self.kept):     # a session's agents stay for the next run
                self.stop_all()

    def drain(self) -> None:
        """Handle every event already queued."""
        time.sleep(0.05)
        while True:
            try:
                node, line = self.events.get_nowait()
            except queue.Empty:
                return
            self.handle(node, line)

    def failure_message(self) -> str:
        """The most likely cause first, then what else was seen; ranks that failed alike on
        one node are said once (``ranks 0, 1 on vm: ...``)."""
        seen = merge_rank_messages([f.message for f in
                                    sorted(self.failures, key=lambda f: f.priority)])
        head, rest = seen[0], seen[1:4]
        if HINT in head:  # the firewall hint once: the others say only what they saw
            rest = [m.split(HINT, 1)[0].rstrip(": ") for m in rest]
        text = head + (f" (also: {'; '.join(rest)})" if rest else "")
        if self.log_dirs:
            text += " [rank logs kept in " + ", ".join(
                f"{d} on {self.name(n)}" for n, d in sorted(self.log_dirs.items())) + "]"
        return text

    def stop_all(self) -> None:
        """Stop every agent still running, and wait until the nodes say they are clean.

        Closing an agent's stdin makes its node's watchdog stop the agent and its ranks and
        then exit, which ends the ssh: so a finished ssh means nothing is left on that node.
        What has not ended after :data:`STOP_WAIT_S` is terminated, then killed.
        """
        stop_together(self.processes, STOP_WAIT_S)


def merge_rank_messages(messages: list[str]) -> list[str]:
    """Messages in their order, each once; ``rank N on HOST: why`` of several ranks with the same
    why on the same host become one line naming the ranks.

    >>> merge_rank_messages(["rank 1 on vm: no eth9", "rank 0 on vm: no eth9", "node2: ssh"])
    ['ranks 1, 0 on vm: no eth9', 'node2: ssh']
    """
    import re

    groups: dict[tuple[str | None, str], list[str]] = {}
    for message in messages:
        m = re.match(r"rank (\d+) on (\S+): (.*)", message, re.S)
        key = (m.group(2), m.group(3)) if m else (None, message)
        ranks = groups.setdefault(key, [])
        if m and m.group(1) not in ranks:
            ranks.append(m.group(1))
    return [why if host is None else
            f"rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)} on {host}: {why}"
            for (host, why), ranks in groups.items()]
