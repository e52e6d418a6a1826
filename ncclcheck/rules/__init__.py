"""The rule registry. Explicit and ordered: a rule exists when it is listed here.

``NODE_RULES`` run on each node's facts (``ncclcheck probe`` shows their findings);
``CLUSTER_RULES`` run over every node at once (``ncclcheck recommend``).
"""

from __future__ import annotations

from ncclcheck.rules import (ib_gdr_not_ready, limits_memlock_limited, limits_shm_too_small,
                             nccl_ibverbs_unloadable, nccl_library_missing,
                             nccl_version_multiple)
from ncclcheck.rules.base import Rule

NODE_RULES: tuple[Rule, ...] = (
    limits_shm_too_small.RULE,
    limits_memlock_limited.RULE,
    nccl_ibverbs_unloadable.RULE,
    nccl_library_missing.RULE,
    nccl_version_multiple.RULE,
    ib_gdr_not_ready.RULE,
)
CLUSTER_RULES: tuple[Rule, ...] = ()
ALL_RULES: tuple[Rule, ...] = NODE_RULES + CLUSTER_RULES
