"""One torch import per node: the agent imports the worker once and forks each local rank from it.

A rank started as ``python -m ncclcheck.bench.worker`` spends 2.5-4 CPU-s importing torch before
it does anything; eight ranks on a node import it eight times at once. The agent
(:mod:`~ncclcheck.bench.agent`) instead imports :mod:`~ncclcheck.bench.worker` (hence torch) once,
in its run mode only (``--hello`` never imports it), and ``os.fork()``\\ s every local rank from
that process, as torch.multiprocessing's fork start method and DataLoader's workers do. Each rank
then runs ``worker.main()`` exactly as the spawned worker did. What makes it safe, and how each
point is checked (``tests/bench/test_forkrank.py``):

* **Nothing initialises CUDA or NCCL before the fork.** ``import torch`` does not (CUDA is lazily
  initialised; NCCL reads its variables at its first communicator, in the rank, so
  ``NCCL_DEBUG_FILE``'s ``%p`` is the rank's pid), and importing the worker runs no torch call
  beyond binding the collectives. :func:`load_worker` refuses to fork (the agent spawns) if
  ``torch.cuda.is_initialized()`` were ever true after the import.
* **No thread.** Importing the worker starts no Python thread (tested: one thread before the
  forks; :func:`load_worker` spawns instead if there were more) and the agent starts its pipe
  readers only after the last fork. torch 2.13's CPU build starts no native thread at import
  either (``/proc/self/task`` holds the main thread alone), and the agent runs no torch op, so no
  thread pool exists yet. A build whose import leaves a native thread parked on a futex is forked
  as safely as DataLoader forks its workers after ``import torch``: a parked thread holds no lock,
  only the forking thread exists in the child, and torch re-creates a pool a child inherits
  (``pthread_atfork(nullptr, nullptr, child_atfork)`` in caffe2/utils/threadpool/
  pthreadpool-cpp.cc, pytorch issue 54752).
* **What torch and its libraries read while loading is what a rank would read.** libgomp reads
  ``OMP_NUM_THREADS`` (and the other ``OMP_*``/``GOMP_*``) when it is loaded, MKL and oneDNN read
  ``MKL_*``/``ONEDNN_*``, torch reads ``TORCH_LOGS``, ``TORCH_CPP_LOG_LEVEL``,
  ``TORCH_DISTRIBUTED_DEBUG``, ``TORCH_SHOW_CPP_STACKTRACES`` and others at import (measured:
  every ``getenv`` and ``os.environ`` read during ``import ncclcheck.bench.worker`` with torch
  2.13, through an ``LD_PRELOAD`` getenv hook). :func:`load_worker` sets every variable that all
  the node's ranks share (the whole rank environment but ``RANK``/``LOCAL_RANK``, which nothing
  reads at import) in the agent before importing, so a forked rank's libraries were set up as a
  spawned rank's would be (tested: a forked rank's ``torch.get_num_threads()`` follows the
  ``OMP_NUM_THREADS=1`` set before the import, where setting it only in the child leaves the
  core count).
* **The child is what ``subprocess.Popen`` would have made** (:func:`start`): the agent's signal
  handlers are gone (SIGTERM/SIGHUP default, SIGINT Python's ``default_int_handler``, with the
  three blocked across the fork so that no agent handler runs in the child), stdin is
  ``/dev/null``, stdout the pipe to the agent, stderr the rank's ``rank.N.stderr`` file (starting
  with what the one import printed, as each spawned rank's import printed it), every other
  descriptor closed (a sibling's pipe held open would keep the agent from seeing EOF), and the
  environment replaced by the rank's (``os.environ`` and the C environment) before anything
  reads it. The agent's buffers are flushed before the fork and its objects frozen out of the
  cyclic collector (``gc.freeze``), so the child neither repeats the agent's output nor closes a
  descriptor by finalizing an agent object. The child leaves through ``os._exit`` with
  ``main()``'s code (never returning into the agent's code nor running its atexit), exit 1 with
  the traceback on stderr on an exception, as Python would. ``ps`` and ``/proc/PID/cmdline``
  show it as ``python -m ncclcheck.bench.worker`` and ``/proc/PID/environ`` holds the rank's
  environment, as for a spawned rank (:func:`_present`), so the ranks are told from the agent
  and their variables read there as before.
* :class:`ForkedRank` is the part of ``Popen`` the agent uses (``pid``, ``stdout``, ``poll``,
  ``wait(timeout)``, ``terminate``, ``kill``, ``returncode`` -N for a signal), and each rank still
  dies with the agent (``PR_SET_PDEATHSIG``, set by ``worker.main``).

When the import fails in the agent (torch missing or broken), :func:`load_worker` returns None and
the agent spawns ``python -m ncclcheck.bench.worker`` as before, so the rank's own error and its
stderr tail reach the user unchanged.

An agent kept for many runs (``--serve``: tune's candidates, ``bench --compare``) imports torch at
its first run only. A later run forks from that import only when every variable read at import
is what that run's ranks would have (all shared variables but :data:`PER_RUN`, which are read
after the import, in the rank: NCCL's at its first communicator, gloo's at its process group,
the rendezvous and the worker's spec when the worker starts); where one differs (a candidate that
sets ``TORCH_DISTRIBUTED_DEBUG`` or ``OMP_NUM_THREADS``), its ranks are spawned, each importing
torch under its own variables.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable

#: The module each rank runs (``main``), as the spawned ``python -m ncclcheck.bench.worker``.
WORKER_MODULE = "ncclcheck.bench.worker"
#: The agent's handlers, undone in each rank.
AGENT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: Variables nothing reads while the worker is imported (prefixes, then names): a later run of a
#: kept agent may set them otherwise and still fork from the first run's import.
PER_RUN = ("NCCL_", "GLOO_")
PER_RUN_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                           "GROUP_RANK", "NODE_RANK", "NCCLCHECK_BENCH_SPEC",
                           "NCCLCHECK_BENCH_AGENT"})
#: The import this process made: the variables read at it (:func:`read_at_import`) and what it
#: printed, for a kept agent's later runs.
_IMPORTED: dict[str, Any] = {}


def read_at_import(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the variables only a rank reads, after the import (:data:`PER_RUN`).

    >>> read_at_import({"NCCL_ALGO": "Ring", "MASTER_PORT": "1", "OMP_NUM_THREADS": "1"})
    {'OMP_NUM_THREADS': '1'}
    """
    return {k: v for k, v in env.items()
            if not k.startswith(PER_RUN) and k not in PER_RUN_NAMES}


def shared_environment(envs: list[dict[str, str]]) -> dict[str, str]:
    """The variables every rank's environment has with the same value.

    >>> shared_environment([{"A": "1", "RANK": "0"}, {"A": "1", "RANK": "1"}])
    {'A': '1'}
    """
    first = envs[0] if envs else {}
    return {k: v for k, v in first.items() if all(e.get(k) == v for e in envs[1:])}


def load_worker(env: dict[str, str]) -> tuple[Callable[[], int], bytes] | None:
    """Import the worker (torch) in this process under ``env`` (the ranks' shared variables);
    its ``main`` and what the import printed, or None when the ranks must be spawned instead
    (the import failed, or left CUDA initialised or a second thread running, or this process
    imported it under other variables read at import: see the module's docstring)."""
    os.environ.update(env)
    if _IMPORTED:                              # a kept agent's later run
        worker = sys.modules[WORKER_MODULE]
        if (read_at_import(env) != _IMPORTED["env"] or worker.torch.cuda.is_initialized()
                or threading.active_count() != 1):
            return None
        return worker.main, _IMPORTED["printed"]
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as printed:
        os.dup2(printed.fileno(), 2)  # the import's warnings (no numpy ...): each rank's stderr
        try:
            worker = importlib.import_module(WORKER_MODULE)
        except Exception:  # noqa: BLE001 - torch missing or broken: the spawned rank says why
            return None
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        printed.seek(0)
        text = printed.read()
    if worker.torch.cuda.is_initialized() or threading.active_count() != 1:
        return None
    _IMPORTED.update(env=read_at_import(env), printed=text)
    return worker.main, text


class ForkedRank:
    """A forked rank, handled as the agent handles a ``subprocess.Popen``."""

    #: The spawned rank's command line, which ``ps`` shows for it (:func:`_present`).
    ARGS = (sys.executable, "-m", WORKER_MODULE)

    def __init__(self, pid: int, stdout: Any) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self.args = list(self.ARGS)

    def poll(self) -> int | None:
        """The exit code if the rank ended (-N: killed by signal N), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a signal handler): as Popen does
                self.returncode = 0
                return 0
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the rank to end; ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(delay if end is None else max(0.0, min(delay, end - time.monotonic())))
            delay = min(delay * 2, 0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(main: Callable[[], int], env: dict[str, str], stderr_path: str,
          printed: bytes = b"") -> ForkedRank:
    """Fork one rank that runs ``main()`` with ``env``, its stderr in ``stderr_path``."""
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    if printed:
        os.write(err, printed)
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.collect()
    gc.freeze()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, AGENT_SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:
            _child(main, env, write, err, mask)  # never returns
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(write)
    os.close(err)
    return ForkedRank(pid, os.fdopen(read, "rb"))


def _child(main: Callable[[], int], env: dict[str, str], write: int, err: int,
           mask: Any) -> None:
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)  # first the descriptors: a failure below
        os.dup2(null, 0)                          # is told in the rank's stderr file
        os.dup2(write, 1)
        os.dup2(err, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.environ.clear()
        _clear_c_environment()
        os.environ.update(env)
        for signum in AGENT_SIGNALS:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                          else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _present(env)
        sys.argv = [sys.modules[WORKER_MODULE].__file__]
        code = _exit_code(main())  # as sys.exit(main()) in the spawned worker
    except SystemExit as exc:  # what the interpreter does with an uncaught SystemExit
        code = _exit_code(exc.code)
    except KeyboardInterrupt:  # Python exits killed by SIGINT after the traceback
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - exit 1 with the traceback, as python would
        traceback.print_exc()
        code = 1
    finally:
        _flush()
        os._exit(code)


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing left to say
            pass


def _clear_c_environment() -> None:
    """Drop what C code put in the environment beside ``os.environ`` (glibc ``clearenv``)."""
    try:
        ctypes.CDLL(None).clearenv()
    except (OSError, AttributeError):
        pass


class _MMMap(ctypes.Structure):
    """``struct prctl_mm_map`` (linux/prctl.h)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
        "arg_start", "arg_end", "env_start", "env_end", "auxv")] + [
        ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


#: The rank's argument and environment areas once :func:`_present` moved them (kept alive).
_AREAS: list[Any] = []


def _present(env: dict[str, str]) -> None:
    """Show this rank to ``ps`` and ``/proc/PID/{cmdline,environ}`` as the spawned rank was
    shown: ``<python> -m ncclcheck.bench.worker`` with the rank's environment (else the agent's
    command line and the agent's first environment would show).

    ``prctl(PR_SET_MM, PR_SET_MM_MAP)`` points the kernel at new areas, every other field as it
    is (``/proc/self/stat``, the break from ``sbrk(0)``); it needs no privilege, only a kernel
    with CONFIG_CHECKPOINT_RESTORE (prctl(2); the distributions' kernels have it). Where it is
    refused the rank shows the agent's, and runs the same."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        stat = [0] * 4 + [int(x) for x in fields[1:49]]  # stat[n]: proc(5)'s field n
    except (OSError, ValueError):
        return
    argv = ctypes.create_string_buffer(b"".join(os.fsencode(a) + b"\0" for a in ForkedRank.ARGS))
    block = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()) or b"\0"
    environ = ctypes.create_string_buffer(block, len(block))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    args, envs = ctypes.addressof(argv), ctypes.addressof(environ)
    mm = _MMMap(stat[26], stat[27], stat[45], stat[46], stat[47], libc.sbrk(0) or 0, stat[28],
                args, args + len(argv.raw) - 1, envs, envs + len(block), 0, 0, 0xFFFFFFFF)
    if stat[26] and libc.prctl(35, 14, ctypes.byref(mm), ctypes.sizeof(mm), 0) == 0:
        _AREAS.extend([argv, environ])  # PR_SET_MM, PR_SET_MM_MAP: the kernel reads them now
