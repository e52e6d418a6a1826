"""Reading NCCL logs: launcher prefixes, NCCL line headers, and the facts NCCL prints.

Everything here is pure text handling, shared by ``ncclcheck diagnose``:

* :mod:`~ncclcheck.logparse.reader` streams lines out of files, gzip files and stdin;
* :mod:`~ncclcheck.logparse.prefix` strips what launchers put in front of a line
  (torchrun ``[rank0]:``, MPI ``[1,0]<stdout>:``, Slurm/pdsh ``host: ``, timestamps);
* :mod:`~ncclcheck.logparse.nccl` splits ``host:pid:tid [dev] src NCCL INFO msg`` lines;
* :mod:`~ncclcheck.logparse.facts` reads what one NCCL INFO message says (version, network, ...);
* :mod:`~ncclcheck.logparse.state` keeps bounded per-process state across a whole log.
"""
