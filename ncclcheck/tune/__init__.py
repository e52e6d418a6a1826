"""``ncclcheck tune``: from nothing to a measured env file in one command.

Modules: :mod:`~ncclcheck.tune.candidates` (what to measure), :mod:`~ncclcheck.tune.plan`
(round order, early stop, significance, budget), :mod:`~ncclcheck.tune.command` (the flow),
:mod:`~ncclcheck.tune.document` (the tune document), :mod:`~ncclcheck.tune.schema` (its JSON
Schema), :mod:`~ncclcheck.tune.verify_remote` (libnccl verification on a node).
"""
