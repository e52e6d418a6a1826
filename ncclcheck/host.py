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
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

#: Environment variables a probe may copy, besides the prefixes below. Launcher and scheduler
#: variables tell ``host`` which context it runs in; the library paths decide which libnccl loads.
ENV_ALLOW_NAMES = frozenset({
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
    "LD_LIBRARY_PATH", "LD_PRELOAD",
    "GLOO_SOCKET_IFNAME", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NODEID", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_STEP_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
    "CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE",  # DeepSpeed's launcher (deepspeed/launcher/launch.py)
    "KUBERNETES_SERVICE_HOST", "container",
})
#: Every variable with one of these prefixes is copied: they are NCCL's and PyTorch's own knobs.
ENV_ALLOW_PREFIXES = ("NCCL_", "TORCH_NCCL_")

DEFAULT_TIMEOUT_S = 5.0
MAX_READ_BYTES = 4 * 1024 * 1024


#: Symbolic links followed for one path before giving up (the kernel's MAXSYMLINKS).
MAX_SYMLINK_HOPS = 40


def read_regular(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES) -> str | None:
    """Text of a regular file (its first ``limit`` bytes), or None when it cannot be read.

    None also for anything that is not a regular file: opening a FIFO blocks until a writer comes
    and a device may never end, so neither is read. The file is opened non-blocking and checked
    with ``fstat`` (no race between a check and the open). /proc and /sys attributes are regular
    files; they are read in small chunks because some refuse one large read (ENOMEM).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(65536, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def env_allowed(name: str) -> bool:
    """Whether ``name`` may be copied from the environment into facts.

    >>> env_allowed("NCCL_IB_HCA"), env_allowed("AWS_SECRET_ACCESS_KEY"), env_allowed("RANK")
    (True, False, True)
    """
    return name in ENV_ALLOW_NAMES or name.startswith(ENV_ALLOW_PREFIXES)


#: ``user:secret@`` in a value (``redis://user:secret@host``, ``admin:pw@10.0.0.1``): the secret
#: runs to the ``@``, so an unencoded ``/`` or ``:`` in it is hidden too.
CREDENTIALS = re.compile(r"(?P<user>[^\s:/@,;=]+):(?!//)(?P<secret>[^\s@]*)@")


def hide_credentials(value: str) -> str:
    """``value`` with the secret of every ``user:secret@`` replaced by ``***``.

    An allow-listed variable may still hold a URL with credentials (``MASTER_ADDR`` given as a
    store URL, say); the name and host stay, the secret never reaches facts or a recording.

    >>> hide_credentials("tcp://admin:s3cr:et/x@10.0.0.1:29500"), hide_credentials("node-01")
    ('tcp://admin:***@10.0.0.1:29500', 'node-01')
    >>> hide_credentials("=mlx5_0:1,mlx5_1:1"), hide_credentials("bob@node-01")
    ('=mlx5_0:1,mlx5_1:1', 'bob@node-01')
    """
    return CREDENTIALS.sub(lambda m: f"{m.group('user')}:***@", value)


def filter_environ(env: dict[str, str]) -> dict[str, str]:
    """Return only the allow-listed variables of ``env``, sorted by name, credentials hidden."""
    return {k: hide_credentials(env[k]) for k in sorted(env) if env_allowed(k)}


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended.

    ``returncode`` is None when the executable was not found or it timed out (``timed_out``).
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.returncode == 0

    def why_failed(self) -> str:
        """A one-line reason, for a probe's ``errors`` list."""
        name = self.argv[0] if self.argv else "?"
        if self.timed_out:
            return f"{name}: timed out"
        if self.returncode is None:
            return f"{name}: not found"
        tail = (self.stderr or self.stdout).strip().splitlines()
        return f"{name}: exit {self.returncode}" + (f": {tail[-1][:200]}" if tail else "")


class QueryFailed(Exception):
    """A native query could not answer (library missing, call failed)."""


class Unavailable(Exception):
    """A probe's subsystem is absent on this host (no driver, no /sys/class/infiniband)."""


class Host(Protocol):
    """What probes may use. See the module docstring."""

    root: str
    sources: list[str]

    def read(self, path: str) -> str | None: ...  # noqa: D102
    def listdir(self, path: str) -> list[str]: ...  # noqa: D102
    def exists(self, path: str) -> bool: ...  # noqa: D102
    def isdir(self, path: str) -> bool: ...  # noqa: D102
    def readlink(self, path: str) -> str | None: ...  # noqa: D102
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult: ...  # noqa: D102
    def query(self, name: str, *args: Any) -> Any: ...  # noqa: D102
    def environ(self) -> dict[str, str]: ...  # noqa: D102


def rel(path: str) -> str:
    """Normalise a machine path to a root-relative one; '' for the root itself.

    >>> rel("/sys/class/net/"), rel("sys/class/../class/net"), rel("/")
    ('sys/class/net', 'sys/class/net', '')
    >>> rel("../etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: path leaves the root: ../etc/passwd
    """
    norm = os.path.normpath("/" + path.lstrip("/")) if path else "/"
    if path and not path.startswith("/") and os.path.normpath(path).startswith(".."):
        raise ValueError(f"path leaves the root: {path}")
    return norm.lstrip("/")


def follow_links(path: str, readlink: Callable[[str], str | None],
                 follow_last: bool = True) -> str | None:
    """Resolve the symbolic links of a machine path as a process chrooted at the root would.

    ``readlink(p)`` answers the target of the root-relative path ``p``, or None when it is not
    a link. An absolute target starts again at the root and ``..`` stops at it. Returns the
    root-relative result, or None after :data:`MAX_SYMLINK_HOPS` links (a loop).

    >>> links = {"lib": "usr/lib", "usr/lib/libnccl.so.2": "/opt/nccl/libnccl.so.2.21.5",
    ...          "loop": "loop"}
    >>> follow_links("/lib/libnccl.so.2", links.get), follow_links("../../lib", links.get)
    ('opt/nccl/libnccl.so.2.21.5', 'usr/lib')
    >>> follow_links("lib", links.get, follow_last=False), follow_links("loop", links.get)
    ('lib', None)
    """
    todo = [p for p in path.split("/") if p]
    done: list[str] = []
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        target = readlink("/".join(done + [part])) if todo or follow_last else None
        if target is None:
            done.append(part)
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            return None
        if target.startswith("/"):
            done = []
        todo = [p for p in target.split("/") if p] + todo
    return "/".join(done)


def _inside(path: str) -> str | None:
    """:func:`rel`, or None for a path that leaves the root."""
    try:
        return rel(path)
    except ValueError:
        return None


def command_key(argv: list[str] | tuple[str, ...]) -> str:
    """A file-name-safe key for a command, used to store and replay its output.

    >>> command_key(["nvidia-smi", "topo", "-m"])
    'nvidia-smi_topo_-m'
    >>> command_key(["ip", "-j", "addr", "show", "dev", "eth0/1"])
    'ip_-j_addr_show_dev_eth0_1'
    """
    text = "_".join(os.path.basename(argv[0]) if i == 0 else a for i, a in enumerate(argv))
    return file_key(text)


def file_key(text: str) -> str:
    """A file-name-safe form of any text.

    >>> file_key("statvfs:/dev/shm")
    'statvfs__dev_shm'
    """
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)[:150]


def query_key(name: str, args: tuple[Any, ...]) -> str:
    """The key a query's answer is stored under in a recording.

    >>> query_key("statvfs", ("/dev/shm",)), query_key("nvml", ())
    ('statvfs:/dev/shm', 'nvml')
    """
    if not args:
        return name
    if all(isinstance(a, str) for a in args):
        return f"{name}:{','.join(args)}"
    return f"{name}:{json.dumps(list(args), sort_keys=True)}"


class LiveHost:
    """Reads files under ``root`` and runs real commands with timeouts."""

    def __init__(self, root: str = "/", env: dict[str, str] | None = None) -> None:
        self.root = os.path.abspath(root)
        self.sources: list[str] = []
        self._env = os.environ if env is None else env
        # Under "/" the kernel resolves links; under any other root we do, so that they stay in it.
        self._chroot = self.root != "/"

    # -- files ---------------------------------------------------------------------------------
    def _path(self, path: str, follow_last: bool = True) -> str | None:
        """The real path of a machine path under the root; None when it would leave the root."""
        try:
            relpath = rel(path)
        except ValueError:
            return None
        if not self._chroot:
            return os.path.join(self.root, relpath)
        return self._resolve(relpath, follow_last)

    def _resolve(self, relpath: str, follow_last: bool) -> str | None:
        """Follow symbolic links without leaving the root (see :func:`follow_links`)."""
        def readlink(link: str) -> str | None:
            here = os.path.join(self.root, link)
            return os.readlink(here) if os.path.islink(here) else None

        try:
            inside = follow_links(relpath, readlink, follow_last)
        except OSError:
            return None
        return None if inside is None else os.path.join(self.root, inside)

    def _touch(self, what: str) -> None:
        self.sources.append(what)

    def read(self, path: str) -> str | None:
        """Text of a regular file under the root, or None when missing or unreadable."""
        real = self._path(path)
        self._touch("/" + rel(path) if real else path)
        return read_regular(real) if real is not None else None

    def listdir(self, path: str) -> list[str]:
        """Sorted names in a directory under the root; [] when missing."""
        real = self._path(path)
        if real is None:
            return []
        try:
            return sorted(os.listdir(real))
        except OSError:
            return []

    def exists(self, path: str) -> bool:
        """Whether a path exists under the root (a dangling link does not)."""
        real = self._path(path)
        return bool(real) and os.path.exists(real)

    def isdir(self, path: str) -> bool:
        """Whether a path is a directory under the root."""
        real = self._path(path)
        return bool(real) and os.path.isdir(real)

    def readlink(self, path: str) -> str | None:
        """The target of a symbolic link, as stored; None when it is not a link."""
        real = self._path(path, follow_last=False)
        if real is None:
            return None
        try:
            return os.readlink(real)
        except OSError:
            return None

    # -- commands and native queries -----------------------------------------------------------
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        """Run ``argv`` (no shell) with a timeout; never raises."""
        argv = [str(a) for a in argv]
        self._touch("$ " + " ".join(argv))
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except FileNotFoundError:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: not found")
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode("utf-8", "replace")
            return CommandResult(tuple(argv), None, out, f"timed out after {timeout:g}s", True)
        except OSError as exc:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: {exc.strerror or exc}")
        return CommandResult(tuple(argv), proc.returncode,
                             proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"))

    def query(self, name: str, *args: Any) -> Any:
        """Call the native query ``name`` (see :mod:`ncclcheck.native`); raises QueryFailed."""
        from ncclcheck import native

        self._touch(f"query {name}")
        return native.call(self, name, *args)

    def environ(self) -> dict[str, str]:
        """The allow-listed environment of this process."""
        return filter_environ(dict(self._env))


def _load_json(path: Path, default: Any) -> Any:
    """A JSON file of a recording; ``default`` when absent. Raises ValueError when unreadable."""
    if not os.path.lexists(path):
        return default
    text = read_regular(path)
    if text is None:
        raise ValueError(f"{path}: not a readable regular file")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def _load_table(path: Path, values: tuple[type, ...]) -> dict[str, Any]:
    """A recording's ``{path: value}`` table, checked, so that bad files fail at load time."""
    from ncclcheck.errors import BadInput

    try:
        data = _load_json(path, {})
    except ValueError as exc:
        raise BadInput(f"recording {exc}") from None
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, values) for k, v in data.items()):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in values)
        raise BadInput(f"recording {path}: expected an object of {names} values")
    return data


class RecordedHost:
    """Replays a recorded machine folder. One small file per fact, so recordings diff cleanly::

        <dir>/README.md                  what machine, where the outputs came from, what was scrubbed
        <dir>/root/...                   files as the probe read them (sysfs, /proc, /etc)
        <dir>/links.json                 {"sys/class/net/eth0": "../../devices/..."}: sysfs links
        <dir>/listings.json              {"sys/class/net": ["eth0", "lo"]}: optional listings
        <dir>/paths.json                 {"dev/infiniband": "dir", "sys/module/x": null}: optional
                                         answers of exists()/isdir() (null: missing)
        <dir>/commands/<key>.txt         a command's stdout (key: :func:`command_key`)
        <dir>/commands/<key>.json        optional {"returncode": 0, "stderr": "", "timed_out": false}
        <dir>/queries/<key>.json         a native query's JSON answer, or {"__error__": "..."}
                                         (key: :func:`file_key` of ``name:["arg", ...]``, or the
                                         bare name, which answers for any arguments)
        <dir>/environ.json               the allow-listed environment

    A command or query that was not recorded behaves as on a machine without it.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"no recording folder {folder}")
        self.root = str(self.folder / "root")
        self.sources: list[str] = []
        self.links: dict[str, str] = _load_table(self.folder / "links.json", (str,))
        self.listings: dict[str, list[str]] = {
            k: [str(n) for n in v]
            for k, v in _load_table(self.folder / "listings.json", (list,)).items()}
        self.paths: dict[str, str | None] = _load_table(self.folder / "paths.json",
                                                        (str, type(None)))
        self.env: dict[str, str] = {k: str(v) for k, v in _load_table(
            self.folder / "environ.json", (str, int, float)).items()}
        self._files = LiveHost(self.root, env={})

    def _touch(self, what: str) -> None:
        self.sources.append(what)

    def read(self, path: str) -> str | None:  # noqa: D102
        key = _inside(path)
        self._touch(path if key is None else "/" + key)
        return None if key is None else self._files.read(key)

    def listdir(self, path: str) -> list[str]:  # noqa: D102
        key = _inside(path)
        if key is None:
            return []
        if key in self.listings:
            return sorted(self.listings[key])
        names = set(self._files.listdir(key))
        prefix = key + "/" if key else ""
        names.update(k[len(prefix):].split("/", 1)[0] for k in self.links
                     if k.startswith(prefix) and k != key)
        return sorted(n for n in names if n)

    def exists(self, path: str) -> bool:  # noqa: D102
        key = _inside(path)
        if key is None:
            return False
        if key in self.paths:
            return self.paths[key] is not None
        return key in self.links or self._files.exists(key) or bool(self.listdir(key))

    def isdir(self, path: str) -> bool:  # noqa: D102
        key = _inside(path)
        if key is None:
            return False
        if key in self.paths:
            return self.paths[key] == "dir"
        return self._files.isdir(key) or key in self.listings

    def readlink(self, path: str) -> str | None:  # noqa: D102
        key = _inside(path)
        if key is None:
            return None
        return self.links.get(key) or self._files.readlink(key)

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:  # noqa: D102
        key = command_key(argv)
        self._touch("$ " + " ".join(argv))
        out_file = self.folder / "commands" / f"{key}.txt"
        try:
            meta = _load_json(self.folder / "commands" / f"{key}.json", None)
        except ValueError as exc:
            return CommandResult(tuple(argv), None, "", f"recorded result unusable: {exc}")
        stdout = read_regular(out_file)
        if meta is None and stdout is None:
            return CommandResult(tuple(argv), None, "", f"{argv[0]}: not found")
        meta = meta if isinstance(meta, dict) else {}
        code = meta.get("returncode", 0)
        return CommandResult(tuple(argv), code if isinstance(code, int) else None, stdout or "",
                             str(meta.get("stderr") or ""), bool(meta.get("timed_out")))

    def query(self, name: str, *args: Any) -> Any:  # noqa: D102
        self._touch(f"query {name}")
        for key in (query_key(name, args), name):
            path = self.folder / "queries" / f"{file_key(key)}.json"
            if os.path.lexists(path):
                try:
                    answer = _load_json(path, None)
                except ValueError as exc:
                    raise QueryFailed(f"{name}: recorded answer unusable: {exc}") from None
                if isinstance(answer, dict) and "__error__" in answer:
                    raise QueryFailed(answer["__error__"])
                return answer
        raise QueryFailed(f"{name}: not recorded")

    def environ(self) -> dict[str, str]:  # noqa: D102
        return filter_environ(self.env)


class RecordingHost(LiveHost):
    """A live host that keeps everything it touched, to write a :class:`RecordedHost` folder.

    Call :meth:`save` after probing. ``scrub`` (a ``str -> str`` function, see
    :mod:`ncclcheck.record`) is applied to every text before it is written.
    """

    def __init__(self, root: str = "/", env: dict[str, str] | None = None) -> None:
        super().__init__(root, env)
        self.files: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.listings: dict[str, list[str]] = {}
        self.commands: dict[str, tuple[dict[str, Any], str]] = {}
        self.queries: dict[str, Any] = {}
        self.env_seen: dict[str, str] = {}
        self.paths: dict[str, str | None] = {}

    def _kind(self, path: str) -> None:
        real = self._path(path)
        if real is not None:
            self.paths[rel(path)] = ("dir" if os.path.isdir(real) else "file"
                                     if os.path.exists(real) else None)

    def exists(self, path: str) -> bool:  # noqa: D102
        self._kind(path)
        return super().exists(path)

    def isdir(self, path: str) -> bool:  # noqa: D102
        self._kind(path)
        return super().isdir(path)

    def read(self, path: str) -> str | None:  # noqa: D102
        text = super().read(path)
        if text is not None:
            self.files[rel(path)] = text
        return text

    def listdir(self, path: str) -> list[str]:  # noqa: D102
        names = super().listdir(path)
        if names:
            self.listings[rel(path)] = names
        return names

    def readlink(self, path: str) -> str | None:  # noqa: D102
        target = super().readlink(path)
        if target is not None:
            self.links[rel(path)] = target
        return target

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:  # noqa: D102
        result = super().run(argv, timeout)
        if result.returncode is not None or result.timed_out:
            self.commands[command_key(argv)] = (
                {"argv": list(result.argv), "returncode": result.returncode,
                 "stderr": result.stderr, "timed_out": result.timed_out}, result.stdout)
        return result

    def query(self, name: str, *args: Any) -> Any:  # noqa: D102
        key = file_key(query_key(name, args))
        try:
            answer = super().query(name, *args)
        except QueryFailed as exc:
            self.queries[key] = {"__error__": str(exc)}
            raise
        self.queries[key] = answer
        return answer

    def environ(self) -> dict[str, str]:  # noqa: D102
        env = super().environ()
        self.env_seen = dict(env)
        return env

    def save(self, folder: str | Path, scrub: Any = None) -> Path:
        """Write the recording into ``folder`` in :class:`RecordedHost`'s layout.

        ``scrub`` is a ``str -> str`` function; when it also has ``file(path, text)`` (as
        :class:`ncclcheck.record.Scrubber` does), recorded files go through that, so that it can
        decode formats that hide identifiers (hex addresses in ``/proc/net/route``).
        """
        clean = scrub or (lambda s: s)
        clean_file = getattr(scrub, "file", None) or (lambda path, text: clean(text))

        def dump(path: Path, data: Any) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(data, indent=2, sort_keys=True) + "\n"
            path.write_text(clean(text))

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        for relpath, text in self.files.items():
            target = out / "root" / clean(relpath)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(clean_file(relpath, text))
        for key, (meta, stdout) in self.commands.items():
            dump(out / "commands" / f"{key}.json", meta)
            (out / "commands" / f"{key}.txt").write_text(clean(stdout))
        for key, answer in self.queries.items():
            dump(out / "queries" / f"{key}.json", answer)
        dump(out / "links.json", self.links)
        dump(out / "listings.json", self.listings)
        dump(out / "paths.json", self.paths)
        dump(out / "environ.json", self.env_seen)
        return out
