"""Terminal output of ``ncclcheck tune``: progress while it measures, then the candidates side
by side and the decision (stderr, so that stdout stays the env file or the JSON)."""

from __future__ import annotations

from typing import Any


def _figure(cand: dict[str, Any], run: dict[str, Any]) -> str:
    if run.get("error"):
        return f"{cand['label']}: failed ({str(run['error'])[:120]})"
    same = f", the run of {run['same_run_as']}" if run.get("same_run_as") else ""
    return (f"{cand['label']}: {run.get('peak_busbw_gbps') or 0:.4g} GB/s peak busbw "
            f"({run.get('wall_s')} s{same})")


class LineProgress:
    """One line per step and per run on a console (logs, CI, a pipe)."""

    def __init__(self, console: Any) -> None:
        self.console, self.done, self.total = console, 0, 0

    def start(self, total: int) -> None:  # noqa: D102
        self.total += total

    def note(self, text: str) -> None:  # noqa: D102
        self.console.print(f"tune: {text}", markup=False, highlight=False, soft_wrap=True)

    def running(self, text: str) -> None:  # noqa: D102
        pass  # the run's line comes when it is done

    def run_done(self, cand: dict[str, Any], run: dict[str, Any]) -> None:  # noqa: D102
        self.done += 1
        self.console.print(f"tune: [{self.done}/{self.total}] {_figure(cand, run)}",
                           markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:  # noqa: D102
        pass


class RichProgress(LineProgress):
    """A rich progress bar over the runs, with each run's figure printed above it."""

    def __init__(self, console: Any) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        super().__init__(console)
        self._bar = Progress(TextColumn("tune"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("{task.fields[what]}"),
                             console=console, transient=True)
        self._task: Any = None

    def start(self, total: int) -> None:  # noqa: D102
        super().start(total)
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task("tune", total=self.total, what="")
        else:
            self._bar.update(self._task, total=self.total)

    def note(self, text: str) -> None:  # noqa: D102
        if self._task is None:
            super().note(text)
        else:
            self._bar.update(self._task, what=text)

    def running(self, text: str) -> None:  # noqa: D102
        self.note(text)

    def run_done(self, cand: dict[str, Any], run: dict[str, Any]) -> None:  # noqa: D102
        self.done += 1
        self._bar.console.print(f"  {_figure(cand, run)}", markup=False, highlight=False)
        if self._task is not None:
            self._bar.update(self._task, completed=self.done)

    def stop(self) -> None:  # noqa: D102
        if self._task is not None:
            self._bar.stop()
            self._task = None


def progress_for(console: Any, quiet: bool) -> Any:
    """Rich progress on a terminal, lines otherwise, nothing with ``--quiet``."""
    from ncclcheck.tune.command import Quiet

    if quiet:
        return Quiet()
    return RichProgress(console) if getattr(console, "is_terminal", False) else LineProgress(console)


def status(cand: dict[str, Any], winner: str, won: bool = True) -> str:
    """What became of a candidate, in one word (the document says why): ``WINNER`` only when
    it beat the baseline beyond the noise; the env written when nothing did is ``kept``.

    >>> status({"id": "a", "measure": True, "stopped": "stopped early: slower"}, "b")
    'stopped'
    >>> status({"id": "b", "measure": True}, "b", won=False)
    'kept'
    """
    if cand["id"] == winner:
        return "WINNER" if won else "kept"
    if not cand.get("measure"):
        return "skipped"
    return (cand.get("stopped") or "").split(":", 1)[0].split(" ", 1)[0]


def render_summary(console: Any, doc: dict[str, Any]) -> None:
    """The candidates side by side, then the decision and the verification."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"tune: {len(doc['hosts'])} nodes, {doc['backend']} over "
                        f"{doc['transport']}; peak busbw (GB/s) over the repeats",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("candidate", overflow="fold")
    for col in ("n", "median", "min-max", "x base"):
        table.add_column(col, no_wrap=True, justify="right")
    table.add_column("status", no_wrap=True)
    winner = doc["winner"]["id"]
    for cand in doc["candidates"]:
        sp = cand.get("spread") or {}
        label = f"{cand['label']}" + (" (stage 2)" if cand["stage"] > 1 else "")
        table.add_row(label, str(len(cand.get("figures") or [])),
                      f"{sp['median_gbps']:.3g}" if sp else "-",
                      f"{sp['min_gbps']:.3g}-{sp['max_gbps']:.3g}" if sp else "-",
                      f"{cand['vs_baseline']:.2f}" if cand.get("vs_baseline") else "-",
                      status(cand, winner, bool(doc["winner"].get("significant"))))
    console.print(table)
    for why in dict.fromkeys(c["not_measured"] for c in doc["candidates"] if not c["measure"]):
        console.print(f"skipped: {why}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"decision: {doc['winner']['why']}", markup=False, highlight=False,
                  soft_wrap=True)
    if doc["budget"].get("stopped"):
        console.print(f"note: {doc['budget']['stopped']}", markup=False, highlight=False)
    ver = doc.get("verify")
    if ver:
        boot = ver.get("bootstrap") or {}
        said = (f"libnccl {ver.get('nccl_version')} on {ver.get('where')} reads it and bootstraps "
                f"on {boot.get('interface')}" if ver.get("ok") else
                "verify FAILED: " + "; ".join(ver.get("problems") or []))
        console.print(said, markup=False, highlight=False, soft_wrap=True)
        for warning in ver.get("warnings") or []:
            console.print(f"  warning: {warning}", markup=False, highlight=False, soft_wrap=True)
