"""The rate ``tc`` shapes a link to, from ``tc qdisc show`` (pure).

Recorded sample (a node of ``scripts/netns-cluster up --rate 200mbit``, iproute2 6.1)::

    qdisc noqueue 0: dev lo root refcnt 2
    qdisc tbf 8001: dev eth0 root refcnt 2 rate 200Mbit burst 50000b lat 25ms

>>> parse_qdiscs("qdisc noqueue 0: dev lo root refcnt 2\\n"
...              "qdisc tbf 8001: dev eth0 root refcnt 2 rate 200Mbit burst 50000b lat 25ms\\n")
[{'ifname': 'eth0', 'qdisc': 'tbf', 'rate_text': '200Mbit', 'rate_bps': 200000000.0}]
"""

from __future__ import annotations

import re
from typing import Any

_LINE = re.compile(r"^qdisc (\S+) \S+ dev (\S+) .*?\brate (\d+(?:\.\d+)?)([KMGT]?)(bit|bps)\b")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def rate_bps(number: str, prefix: str, unit: str) -> float:
    """Bits per second of a tc rate (``200`` ``M`` ``bit``; ``bps`` is bytes per second).

    >>> rate_bps("40", "M", "bit"), rate_bps("1", "G", "bit"), rate_bps("10", "M", "bps")
    (40000000.0, 1000000000.0, 80000000.0)
    """
    value = float(number) * _SCALE[prefix]
    return value * 8 if unit == "bps" else value


def parse_qdiscs(text: str) -> list[dict[str, Any]]:
    """The qdiscs that carry a rate (tbf, netem rate, cake bandwidth printed as rate)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out.append({"ifname": m.group(2), "qdisc": m.group(1),
                        "rate_text": m.group(3) + m.group(4) + m.group(5),
                        "rate_bps": rate_bps(m.group(3), m.group(4), m.group(5))})
    return out
