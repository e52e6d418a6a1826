"""The bench table as the sweep runs: each size's row when it finishes, as nccl-tests prints.

``ncclcheck bench ... | tee log`` shows the head of the table when the ranks are ready, then one
row per size as rank 0 reports it (each write flushed), then the footer. Which devices the ranks
used, the versions and the transport are known only at the end, so in the streamed table they
follow the footer instead of preceding the rows (the rows and column lines are still nccl-tests'
own, and ``--import`` reads the output back). A sample (2 gloo ranks, ``-b 1M -e 2M``)::

    # ncclcheck bench: all_reduce float
    # nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 ...
    #
    #                                                              out-of-place  ...
    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)        ...
         1048576        262144     float     sum      -1   1123.5    0.93    0.93       0 ...
         2097152        524288     float     sum      -1   2233.9    0.94    0.94       0 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 0.935 
    #
    # Using devices
    #  Rank  0 Group  0 Pid   4242 on      node1 device  0 [gloo]
    ...
"""

from __future__ import annotations

from typing import Any, Callable

from ncclcheck.render.bench import (footer_lines, format_row, rank_lines, run_lines,
                                    summary_lines, sweep_line, table_header)


class StreamTable:
    """A progress receiver (start/update/stop) that prints the table as rows arrive.

    ``write`` gets whole lines and must flush; ``inner`` is another progress receiver (the rich
    bar on a terminal) that is driven alongside.
    """

    def __init__(self, head: dict[str, Any], write: Callable[[str], None],
                 inner: Any = None) -> None:
        self.head, self.write, self.inner = head, write, inner
        self.started = False
        self.printed: list[int] = []

    def start(self, total: int) -> None:  # noqa: D102
        if not self.started:
            self.started = True
            head = self.head
            sweep = head.get("sweep") or {}
            if total and sweep.get("step_factor", 1) > 1:  # over gloo the sweep may end early
                from ncclcheck.bench.sweep import sizes

                planned = sizes(sweep["min_bytes"], sweep["max_bytes"], sweep["step_factor"])
                if total < len(planned):
                    head = {**head, "sweep": {**sweep, "max_bytes": planned[total - 1]}}
            lines = [f"# ncclcheck bench: {head.get('op')} {head.get('dtype')}",
                     sweep_line(head), "#", *table_header()]
            self.write("\n".join(lines) + "\n")
        if self.inner:
            self.inner.start(total)

    def update(self, done: int, row: dict[str, Any]) -> None:  # noqa: D102
        if self.started and row and row.get("size_bytes") not in self.printed:
            self.printed.append(row["size_bytes"])
            self.write(format_row(row) + "\n")
        if self.inner:
            self.inner.update(done, row)

    def stop(self) -> None:  # noqa: D102
        if self.inner:
            self.inner.stop()

    def rest(self, doc: dict[str, Any]) -> str:
        """What is left to print once the document is complete: the rows not yet shown (none,
        normally), the footer, the devices, the versions and the summary."""
        rows = [r for r in doc.get("rows") or [] if r.get("size_bytes") not in self.printed]
        lines = [format_row(r) for r in rows] + footer_lines(doc)
        lines += ["# Using devices", *rank_lines(doc), "#", *run_lines(doc), *summary_lines(doc)]
        return "\n".join(lines) + "\n"
