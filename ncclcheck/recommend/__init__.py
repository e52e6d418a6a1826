"""``ncclcheck recommend``: facts (and measurements) in, one environment for every node out.

Flow: load facts (``--probe`` files, or probe this node) -> run every node rule on each node and
every cluster rule on all nodes (:func:`ncclcheck.rules.engine.evaluate`) -> merge the variables
the findings propose -> let bench results decide ties -> refuse values that no env file can hold
safely -> the recommendation document, and the text of the chosen format.

One module per job (this file imports none of them):

* :mod:`ncclcheck.recommend.inputs`: facts and bench documents in;
* :mod:`ncclcheck.recommend.merge`: the variables the findings propose, merged, never picking
  in silence;
* :mod:`ncclcheck.recommend.ties`: ties decided by measured bus bandwidth, candidate env files;
* :mod:`ncclcheck.recommend.document`: the recommendation document;
* :mod:`ncclcheck.recommend.text`: the env file's text, the other formats, ``--fail-on`` problems;
* :mod:`ncclcheck.recommend.verify`: ``--verify`` with the real libnccl;
* :mod:`ncclcheck.recommend.command`: everything the command does but printing.
"""
