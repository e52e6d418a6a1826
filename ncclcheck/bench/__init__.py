"""``ncclcheck bench``: collective bandwidth over torch.distributed, measured like nccl-tests.

Modules, from the pure core out to the processes:

* :mod:`~ncclcheck.bench.formulas`: nccl-tests' counts, sizes, algbw and busbw (pure).
* :mod:`~ncclcheck.bench.sweep`: ``-b/-e/-f`` sizes, dtypes and ops (pure).
* :mod:`~ncclcheck.bench.envfile`: ``--env`` and ``--env-file`` candidate configurations (pure).
* :mod:`~ncclcheck.bench.ifname`: ``NCCL_SOCKET_IFNAME`` matching, for gloo's interface.
* :mod:`~ncclcheck.bench.transport`: what NCCL really used, from ``NCCL_DEBUG=INFO`` logs (pure).
* :mod:`~ncclcheck.bench.importer`: nccl-tests output into a bench document (pure).
* :mod:`~ncclcheck.bench.document`: the bench document: rows, averages, comparisons (pure).
* :mod:`~ncclcheck.bench.worker`: one rank's measurement loop. **The only module that imports
  torch.**
* :mod:`~ncclcheck.bench.agent`: the per-node agent that starts that node's ranks.
* :mod:`~ncclcheck.bench.forkrank`: the agent's one import of the worker and a rank forked from
  it, handled as a ``Popen``.
* :mod:`~ncclcheck.bench.launch`: local spawn, launcher detection, multi-node over ssh.

Importing this package imports nothing heavy, so ``ncclcheck --help`` stays fast.
"""
