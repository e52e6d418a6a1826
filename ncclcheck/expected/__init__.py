"""Expected bandwidth: a shipped table of what each hardware class gives (``table.json``, every
figure with its public source), the class a run belongs to (found from its records, the facts or
an imported nccl-tests table) and a verdict on its figures, with the hop that limits a low one.

* :mod:`~ncclcheck.expected.table` -- the table and its checks;
* :mod:`~ncclcheck.expected.gpus` -- GPU names into models, NVLink and PCIe generations;
* :mod:`~ncclcheck.expected.classify` -- the class of a run;
* :mod:`~ncclcheck.expected.limits` -- what limits a low figure, read from the facts;
* :mod:`~ncclcheck.expected.verdict` -- the bench document's ``expected`` object;
* :mod:`~ncclcheck.expected.pairs` -- per pair against the per-link expectation (pairwise);
* :mod:`~ncclcheck.expected.qdisc` -- the rate a ``tc`` qdisc shapes a link to.
"""
