"""``ncclcheck tune``: probe every node, run the rules, measure the candidates, keep the fastest
env that beats NCCL's defaults beyond the noise, verify it with the real libnccl.

Flow (each step reuses the command that does it alone):

1. facts from every node (:func:`ncclcheck.cluster.collect_cluster`, as ``probe --hostfile`` or
   ``--launcher slurm``) and the rules (:func:`ncclcheck.recommend.document.recommend`);
2. the candidates (:mod:`ncclcheck.tune.candidates`);
3. bench runs (:func:`ncclcheck.bench.launch.run` with bench's own options, as
   ``bench --compare`` runs each env file), ``--repeats`` rounds in varying order, stopping
   clearly worse candidates early (:mod:`ncclcheck.tune.plan`), within ``--budget``;
4. the decision (:func:`ncclcheck.tune.plan.decide`); on Socket with NCCL a second stage tries
   helper threads x sockets over the first stage's winner;
5. the env file in recommend's formats (:func:`ncclcheck.recommend.text.render_output`), verified
   (:mod:`ncclcheck.tune.verify_remote`), and the tune document (:mod:`ncclcheck.tune.document`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ncclcheck.bench.sweep import parse_budget
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.tune import plan
from ncclcheck.tune.candidates import (BASELINE, backend_for, first_stage, gloo_interfaces,
                                       holder, socket_stage, transport_for)

#: Seconds kept back from the budget for verification and writing.
RESERVE_S = 20.0
#: The least a run is given (its deadline), and the least verification is given.
MIN_RUN_S, MIN_VERIFY_S = 5.0, 10.0
#: How a run that the end of the budget stopped is recorded (its error begins so).
CUT = "cut at the end of --budget"


@dataclasses.dataclass
class TuneRequest:
    """The options of ``ncclcheck tune``."""

    hostfile: str | None = None
    launcher: str | None = None
    nodes: int | None = None
    ssh_config: str | None = None
    remote_python: str | None = None
    connect_timeout: float = 10.0
    timeout: float = 120.0
    budget: str = "10m"
    repeats: int = 3
    op: str = "all_reduce"
    min_bytes: str = "1M"
    max_bytes: str = "2M"
    warmup: int = 1
    iters: int = 4
    backend: str = "auto"
    procs: int | None = None
    fmt: str = "env"
    verify: bool = True
    nccl_lib: str | None = None


class Quiet:
    """Progress sink that says nothing (the CLI passes a rich or line-per-run one)."""

    def start(self, total: int) -> None:  # noqa: D102
        pass

    def note(self, text: str) -> None:  # noqa: D102
        pass

    def running(self, text: str) -> None:  # noqa: D102
        pass

    def run_done(self, cand: dict[str, Any], run: dict[str, Any]) -> None:  # noqa: D102
        pass

    def stop(self) -> None:  # noqa: D102
        pass


def capped(own: float, left: float) -> float:
    """A run's deadline: its own (bench's backstop) or what is ``left`` for measuring, the
    smaller, but at least MIN_RUN_S (:meth:`Clock.fits` starts no run with less left).

    >>> capped(840.0, 12.0), capped(9.0, 12.0), capped(840.0, 2.0)
    (12.0, 9.0, 5.0)
    """
    return max(MIN_RUN_S, min(own, left))


class Clock:
    """The ``--budget``: seconds used and left, and whether a run of the usual length fits."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s, self.started, self.walls = budget_s, time.monotonic(), []
        self.stopped: str | None = None

    def used(self) -> float:  # noqa: D102
        return time.monotonic() - self.started

    def left(self) -> float:
        """Seconds left for measuring (the reserve kept back)."""
        return self.budget_s - self.used() - min(RESERVE_S, self.budget_s * 0.1)

    def run_deadline(self, own: float) -> float:
        """The deadline handed to the next run (:func:`capped` by what is left now)."""
        return capped(own, round(self.left(), 1))

    def verify_timeout(self) -> float:
        """What verification gets: what is left of the whole budget, at least MIN_VERIFY_S."""
        return max(MIN_VERIFY_S, round(self.budget_s - self.used(), 1))

    def fits(self) -> bool:
        """Whether another run fits: at least 5 s left and as long as the longest run so far."""
        need = max(self.walls, default=MIN_RUN_S)
        if self.left() < max(MIN_RUN_S, need):
            self.stopped = (f"budget: {self.left():.0f} s left for measuring, a run takes "
                            f"about {need:.0f} s; the rest was not measured")
            return False
        return True


def run_options(req: TuneRequest, env: dict[str, str], clock: Clock) -> Any:
    """Bench's options for one run of ``env``: bench's own, with the run's deadline capped by
    what is left of the budget (:meth:`Clock.run_deadline`)."""
    from ncclcheck.bench.command import BenchRequest, bench_options
    from ncclcheck.bench.options import run_deadline

    breq = BenchRequest(op=req.op, min_bytes=req.min_bytes, max_bytes=req.max_bytes,
                        warmup=req.warmup, iters=req.iters, backend=req.backend,
                        procs=req.procs, nodes=req.nodes, hostfile=req.hostfile,
                        ssh_config=req.ssh_config, remote_python=req.remote_python,
                        connect_timeout=req.connect_timeout, launcher=req.launcher,
                        timeout=max(MIN_RUN_S, min(req.timeout, clock.left())))
    opts = bench_options(breq, env)
    own = run_deadline(opts)
    cap = clock.run_deadline(own)
    opts.deadline_s = cap if cap < own else None
    return opts


def open_session(req: TuneRequest, clock: Clock) -> Any:
    """The agents every run over ssh shares (:mod:`ncclcheck.bench.session`: one ssh, one
    interpreter and one torch import per node for the whole tune, not per run); None through
    Slurm (each run is an srun step)."""
    if not req.hostfile or req.launcher == "slurm":
        return None
    from ncclcheck.bench.session import Session
    from ncclcheck.remote.ssh import SSH

    ssh = SSH(ssh_config=req.ssh_config, connect_timeout=req.connect_timeout,
              remote_python=req.remote_python)
    return Session(req.hostfile, req.nodes, ssh, max(MIN_RUN_S, clock.left()))


def bench_once(req: TuneRequest, env: dict[str, str], clock: Clock,
               session: Any = None) -> dict[str, Any]:
    """One bench run of ``env`` (bench's own options and launcher, ``session``'s agents when
    given); a run record. A run that the end of the budget stops is recorded with its error
    beginning :data:`CUT`, and ends the measuring (``clock.stopped``)."""
    from ncclcheck.bench import launch
    from ncclcheck.bench.options import Progress

    opts = run_options(req, env, clock)
    started = time.monotonic()
    record: dict[str, Any] = {"peak_busbw_gbps": None, "avg_busbw_gbps": None, "error": None}
    try:
        doc = launch.run(opts, Progress(), session=session)
    except BadInput:
        raise
    except NcclcheckError as exc:
        record["error"] = str(exc)
        doc = None
        if opts.deadline_s is not None and time.monotonic() - started >= opts.deadline_s:
            record["error"] = f"{CUT} (its deadline: {opts.deadline_s:g} s): {exc}"
            clock.stopped = (f"budget: a run was {CUT} ({opts.deadline_s:g} s); the rest was "
                             "not measured")
    wall = round(time.monotonic() - started, 2)
    clock.walls.append(wall)
    record["wall_s"] = wall
    if doc is not None:
        transport = doc.get("transport") or {}
        record.update({"peak_busbw_gbps": doc.get("peak_busbw_gbps"),
                       "avg_busbw_gbps": doc.get("avg_busbw_gbps"),
                       "backend": doc.get("backend"), "network": transport.get("network"),
                       "interfaces": list(transport.get("interfaces") or []),
                       "wrong_total": doc.get("wrong_total")})
        if doc.get("wrong_total"):
            record["error"] = f"{doc['wrong_total']} wrong elements (#wrong)"
    return record


def measure(cands: list[dict[str, Any]], req: TuneRequest, clock: Clock, progress: Any,
            baseline: str, rounds: list[dict[str, Any]],
            resolves: dict[str, str] | None = None, session: Any = None) -> None:
    """``req.repeats`` rounds over the measurable candidates (varying order, early stop);
    ``resolves``: the interface gloo would use for each (:func:`plan.same_run`); ``session``:
    the agents the runs share (:func:`open_session`)."""
    active = [c for c in cands if c["measure"]]
    by_id = {c["id"]: c for c in active}
    for cand in active:
        cand.setdefault("runs", [])
        cand.setdefault("figures", [])
    twins: dict[str, str] = {}  # candidate id: whose run is its repeat (plan.same_run)

    def record(each: dict[str, Any], run: dict[str, Any], runner: str) -> None:
        rec = run if each["id"] == runner else {**run, "same_run_as": runner}
        each["runs"].append(rec)
        if run["error"] is None and isinstance(run["peak_busbw_gbps"], (int, float)):
            each["figures"].append(run["peak_busbw_gbps"])
        progress.run_done(each, rec)

    def done(cand: dict[str, Any], r: int) -> bool:
        return any(x["round"] == r for x in cand["runs"])

    for r in range(1, req.repeats + 1):
        order = plan.round_order([c["id"] for c in active], r - 1)
        rounds.append({"stage": active[0]["stage"] if active else None, "round": r,
                       "order": order})
        for position, cid in enumerate(order):
            if cid in twins or done(by_id[cid], r):
                continue  # its repeat is its twin's run, recorded there
            if not clock.fits():
                return
            cand = by_id[cid]
            progress.running(f"round {r}/{req.repeats}: {cand['label']}")
            run = {"round": r, "position": position + 1,
                   **bench_once(req, cand["env"], clock, session)}
            record(cand, run, cid)
            if clock.stopped:  # the budget ended inside this run
                return
            # a run can join others to it (or show they are not one configuration): at once
            twins = plan.same_run(active, baseline, resolves)
            for twin, runner in twins.items():
                own = next((x for x in by_id[runner]["runs"] if x["round"] == r
                            and not x.get("same_run_as")), None)
                if own is not None and not done(by_id[twin], r):
                    record(by_id[twin], own, runner)
        for cand in list(active):
            if cand["runs"] and all(x["error"] for x in cand["runs"]):
                cand["stopped"] = f"failed: {cand['runs'][-1]['error']}"
                active.remove(cand)
        figures = {c["id"]: c["figures"] for c in active}
        for cid, why in plan.clearly_worse(figures, baseline).items():
            by_id[cid]["stopped"] = f"stopped early: {why}"
            active.remove(by_id[cid])
        twins = plan.same_run(active, baseline, resolves)


def tune(req: TuneRequest, progress: Any = None) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Everything ``ncclcheck tune`` does but printing: (tune document, final recommendation
    document, env text in ``req.fmt``)."""
    from ncclcheck.cluster import collect_cluster
    from ncclcheck.recommend.document import recommend
    from ncclcheck.tune.document import final_recommendation, tune_document

    progress = progress or Quiet()
    try:
        clock = Clock(parse_budget(req.budget))
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if req.repeats < 2:
        raise BadInput("--repeats must be at least 2: the decision needs the spread of repeats")
    from ncclcheck.remote.slurm import choose_launcher

    req.launcher = choose_launcher(req.launcher, req.hostfile, [])
    if not req.hostfile and req.launcher != "slurm":
        raise BadInput("tune needs the nodes: --hostfile FILE, or --launcher slurm (inside "
                       "salloc/sbatch it is the default)")
    progress.note("probing every node")
    cluster = collect_cluster(req.hostfile, req.nodes, req.ssh_config, req.remote_python,
                              min(req.timeout, max(5.0, clock.left())), req.connect_timeout,
                              32, [], None, req.launcher)
    if cluster.get("failed"):
        failed = "; ".join(f"{f.get('host')}: {f.get('reason')}" for f in cluster["failed"])
        raise NcclcheckError(f"probe failed on some nodes, nothing measured: {failed[:500]}")
    nodes = cluster["nodes"]
    rec = recommend(cluster, [], sources=[req.hostfile or req.launcher or "this node"])
    backend, transport = backend_for(nodes, req.backend), transport_for(nodes)
    stage1 = first_stage(rec, nodes, backend, transport)
    progress.start(sum(c["measure"] for c in stage1) * req.repeats)
    rounds: list[dict[str, Any]] = []
    resolves = gloo_interfaces(stage1, nodes) if backend == "gloo" else {}
    session = open_session(req, clock)
    try:
        measure(stage1, req, clock, progress, BASELINE, rounds, resolves, session)
        winner, decision, stage2 = second_stage(req, clock, progress, rec, stage1, rounds,
                                                backend, transport, session)
    finally:
        if session is not None:
            session.close()
    progress.stop()
    final = final_recommendation(rec, winner, decision)
    text = render_env(final, req.fmt)
    verify = None
    if req.verify:
        progress.note("verifying the env file with libnccl")
        verify = verify_env(final, nodes, req, clock.verify_timeout())
    doc = tune_document(req, rec, nodes, backend, transport, stage1 + stage2, rounds, decision,
                        winner, final, clock, verify)
    return doc, final, text


def second_stage(req: TuneRequest, clock: Clock, progress: Any, rec: dict[str, Any],
                 stage1: list[dict[str, Any]], rounds: list[dict[str, Any]], backend: str,
                 transport: str, session: Any) -> tuple[dict[str, Any], dict[str, Any],
                                                        list[dict[str, Any]]]:
    """The first stage's decision, then (on Socket with NCCL) helper threads x sockets over its
    winner: (winner, decision, the second stage's candidates)."""
    # the rules' env may equal NCCL's defaults or one link's: then that candidate holds it
    rules = holder(stage1, rec.get("env") or {})
    decision = plan.decide([c for c in stage1 if c.get("figures")], BASELINE, rules)
    winner = next(c for c in stage1 if c["id"] == decision["id"])
    winner, decision = hold_list(winner, decision, stage1)
    stage2 = socket_stage(winner["env"], backend, transport)
    if any(c["measure"] for c in stage2) and not clock.stopped:
        # the stage-1 winner is measured again beside the grid: the same rounds, the same drift
        reference = {**winner, "stage": 2, "runs": [], "figures": [], "stopped": None,
                     "sources": ["stage 1's winner, the reference of stage 2"]}
        stage2 = [reference] + stage2
        measure(stage2, req, clock, progress, reference["id"], rounds, session=session)
        second = plan.decide([reference] + [c for c in stage2 if c.get("figures")],
                             reference["id"], reference["id"])
        if second["significant"]:
            decision = {**second, "why": decision["why"] + "; then " + second["why"]}
            winner = next(c for c in stage2[1:] if c["id"] == second["id"])
    return winner, decision, stage2


def hold_list(winner: dict[str, Any], decision: dict[str, Any],
              cands: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The interface list to write held against the measurements (:mod:`ncclcheck.tune.lists`):
    members measured clearly slower alone leave it; a list measured on fewer interfaces than it
    names is said to be so."""
    from ncclcheck.tune import lists

    decision, env = lists.drop_slow_members(decision, cands, winner["env"])
    if decision.get("trimmed"):
        winner = next((c for c in cands if c["env"] == env),
                      {**winner, "id": f"{lists.IFNAME}={env[lists.IFNAME]}",
                       "label": f"{lists.IFNAME}={env[lists.IFNAME]}", "env": env})
    note = lists.list_note(next((c for c in cands if c["env"] == env), None), env)
    if note:
        decision = {**decision, "why": f"{decision['why']}; {note}", "list_not_measured": True}
    return winner, decision


def render_env(final: dict[str, Any], fmt: str) -> str:
    """The env file text in any of recommend's formats."""
    from ncclcheck.recommend.text import render_output

    return render_output(final, fmt)


def verify_env(final: dict[str, Any], nodes: list[dict[str, Any]], req: TuneRequest,
               timeout: float) -> dict[str, Any]:
    """Verify the env form of the result on a node (:mod:`ncclcheck.tune.verify_remote`)."""
    from ncclcheck.tune.verify_remote import verify_on_nodes

    target = ssh = None
    if req.launcher == "slurm":
        import socket

        from ncclcheck.tune.verify_remote import verify_text, verify_via_srun

        here = next((n for n in nodes if n.get("hostname") == socket.gethostname()), None)
        if here is not None:
            return verify_text(render_env(final, "env"), req.nccl_lib, here, timeout)
        return verify_via_srun(render_env(final, "env"), req.nccl_lib, timeout, req.remote_python)
    if req.hostfile:
        from ncclcheck.hostfile import load_hostfile
        from ncclcheck.remote.ssh import SSH

        target = load_hostfile(req.hostfile, req.nodes)[0]
        ssh = SSH(ssh_config=req.ssh_config, connect_timeout=req.connect_timeout,
                  remote_python=req.remote_python)
    return verify_on_nodes(render_env(final, "env"), nodes, req.nccl_lib, target, ssh, timeout)
