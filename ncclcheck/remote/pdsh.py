"""pdsh output as input: ``pdsh -w node[1-2] ncclcheck probe --json > facts.txt``.

pdsh prefixes every line a node prints with ``host: `` (DeepSpeed's multi-node launcher runs
through pdsh the same way), so the facts documents arrive interleaved line by line. The lines
are put back together per host before they are read as JSON; a host whose lines are not one
facts document is reported as failed, with its last line, and the others are kept.
"""

from __future__ import annotations

import re

PDSH_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*): ?(.*)$")


def split_pdsh(text: str) -> dict[str, str] | None:
    """Each host's output, when every non-blank line has pdsh's ``host: `` prefix; else None.

    >>> split_pdsh('node1: {\\nnode2: {\\nnode1:  "n": 1}\\nnode2:  "n": 2}\\n')
    {'node1': '{\\n "n": 1}', 'node2': '{\\n "n": 2}'}
    >>> split_pdsh('{\\n  "hostname": "node1"\\n}') is None
    True
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    hosts: dict[str, list[str]] = {}
    for line in lines:
        match = PDSH_LINE.match(line)
        if not match:
            return None
        hosts.setdefault(match.group(1), []).append(match.group(2))
    return {host: "\n".join(body) for host, body in hosts.items()}
