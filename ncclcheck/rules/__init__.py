"""The rule registry. Explicit and ordered: a rule exists when it is listed here.

``NODE_RULES`` run on each node's facts (``ncclcheck probe`` shows their findings);
``CLUSTER_RULES`` run over every node at once (``ncclcheck recommend``).
"""

from __future__ import annotations

from ncclcheck.rules.base import Rule

NODE_RULES: tuple[Rule, ...] = ()
CLUSTER_RULES: tuple[Rule, ...] = ()
ALL_RULES: tuple[Rule, ...] = NODE_RULES + CLUSTER_RULES
