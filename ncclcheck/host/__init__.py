"""The rooted reader: the only way probes touch a machine.

A probe never calls ``open``, ``os.listdir`` or ``subprocess`` itself. It asks a :class:`Host`:

* ``read(path)`` / ``listdir(path)`` / ``exists(path)`` / ``readlink(path)``: files under the
  host's root. Paths are written as on the machine (``"sys/class/net"`` or ``"/sys/class/net"``);
  both mean ``<root>/sys/class/net``. A path that would leave the root reads as missing, and
  symbolic links under a root other than ``/`` are followed inside it, as the machine itself
  would (an absolute link target starts at the root). Only regular files are read, at most
  :data:`MAX_READ_BYTES` of each: a FIFO, socket or device reads as missing, so a planted FIFO
  cannot block the probe.
* ``run(argv)``: a command, as an argv list (never a shell string), with a timeout.
* ``query(name, *args)``: a native call that is neither a file nor a command (NVML, ``dlopen`` of
  libnccl). The callables live in :mod:`ncclcheck.native`; their answers are plain JSON.
* ``environ()``: the allow-listed environment (:data:`ENV_ALLOW_NAMES`, :data:`ENV_ALLOW_PREFIXES`).
  Nothing else of the environment ever enters a facts document.

Three implementations share that surface:

* :class:`LiveHost` reads the real machine (``root="/"``, or a mounted host tree such as
  ``/host`` or an unpacked sos report).
* :class:`RecordedHost` replays a recording folder (``tests/fixtures/hosts/<name>``).
* :class:`RecordingHost` is a live host that also writes everything it touched into a folder, which
  :class:`RecordedHost` replays later (``ncclcheck record``).

Every host keeps ``sources``, the ordered list of what was read or run.

The code lives in one file per job, and each name is imported from the module that defines it:

* :mod:`ncclcheck.host.protocol`: the :class:`Host` surface, :class:`CommandResult`,
  :class:`Unavailable` (and :class:`~ncclcheck.errors.QueryFailed`).
* :mod:`ncclcheck.rootpaths`: paths under the root, links followed inside it, bounded reads
  (below both this package and :mod:`ncclcheck.native`, which needs them too).
* :mod:`ncclcheck.host.envfilter`: the allow-listed environment, credentials hidden.
* :mod:`ncclcheck.host.keys`: the keys commands and queries are recorded under.
* :mod:`ncclcheck.host.live`, :mod:`ncclcheck.host.recorded`, :mod:`ncclcheck.host.recording`:
  the three hosts.
"""
