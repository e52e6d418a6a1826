"""Work on other nodes: ssh and srun with deadlines, pdsh output, and the remote watchdog.

One module per job (this file imports none of them):

* :mod:`ncclcheck.remote.ssh`: :class:`~ncclcheck.remote.ssh.SSH` and ``run_all``, commands on
  many nodes over the system ssh;
* :mod:`ncclcheck.remote.process`: one running remote command, its output and result, every live
  one stopped at exit;
* :mod:`ncclcheck.remote.quoting`: what reaches the remote shell, checked and quoted; why ssh
  itself failed;
* :mod:`ncclcheck.remote.slurm`: inside an allocation, ``srun`` instead of ssh;
* :mod:`ncclcheck.remote.pdsh`: pdsh's ``host:``-prefixed output read back per host;
* :mod:`ncclcheck.remote.watchdog`: ``python -m ncclcheck.remote.watchdog``, run on the remote
  node, stops the command's whole process tree on end of input, deadline or signal.
"""
