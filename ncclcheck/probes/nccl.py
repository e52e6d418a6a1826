"""nccl: every libnccl on the node with its exact version, and which one torch loads.

Also torch and its CUDA version (from package files, never by importing torch), NCCL plugins
(``libnccl-net*.so`` such as aws-ofi-nccl), whether libibverbs and its providers load, and the
NCCL config files.

Sources (relative to the host root):
    ``ldconfig -p`` (else etc/ld.so.conf and etc/ld.so.conf.d/*.conf), LD_LIBRARY_PATH and
    LD_PRELOAD from the allow-listed environment, the usual library folders
    (usr/lib/x86_64-linux-gnu, usr/lib64, usr/local/cuda*/lib64, opt/nccl*/lib, ...),
    <site-packages>/nvidia/nccl/lib, <site-packages>/torch/version.py,
    <site-packages>/torch-*.dist-info/METADATA, <site-packages>/nvidia_nccl_cu*.dist-info/METADATA,
    etc/libibverbs.d/*.driver, etc/nccl.conf, ~/.nccl.conf or $NCCL_CONF_FILE;
    native queries ``python_paths``, ``lib_versions`` (ncclGetVersion) and ``verbs``.

Sample ``ldconfig -p`` lines (NVIDIA/nccl#1991, Ubuntu 24.04 with the libnccl2 deb)::

    libnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2

Which libnccl torch loads: PyPI wheels of torch (2.x) depend on ``nvidia-nccl-cu12`` and set
``DT_RPATH`` ``$ORIGIN/../../nvidia/nccl/lib`` with ``patchelf --force-rpath`` "to avoid
LD_LIBRARY_PATH override" (pytorch .ci/manywheel/build_cuda.sh), and torch/__init__.py
``_preload_cuda_deps`` loads ``nvidia/nccl/lib/libnccl.so.*[0-9]`` from the first ``sys.path``
entry that has one. Only ``LD_PRELOAD`` comes before that.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Callable, Optional, TypedDict

from ncclcheck.host import Host, QueryFailed, follow_links

#: File names of the NCCL library itself.
LIB_NAME = re.compile(r"^libnccl\.so(\.\d+)*$")
#: File names of NCCL plugins: net, tuner, profiler, env, gin (src/plugin/plugin_open.cc).
PLUGIN_NAME = re.compile(r"^libnccl-[A-Za-z0-9_.+-]+\.so(\.\d+)*$")
#: The soname programs link against.
SONAME = "libnccl.so.2"
#: Folders the dynamic loader searches without a cache entry (glibc's trusted folders).
TRUSTED_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu",
                "usr/lib/aarch64-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib")
#: Where Python installs live, besides what the running interpreter reports.
PYTHON_BASES = ("usr/lib", "usr/local/lib", "usr/lib64", "usr/local/lib64", "opt/conda/lib")
#: Folders where plugins and hand-installed NCCL builds usually live.
EXTRA_DIRS = ("usr/local/lib", "opt/amazon/ofi-nccl/lib", "opt/amazon/ofi-nccl/lib64",
              "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "opt/aws-ofi-nccl/lib",
              "opt/amazon/aws-ofi-nccl/lib")
#: Folders of a CUDA install, relative to /usr/local/cuda*.
CUDA_SUBDIRS = ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
#: Config files NCCL reads (src/misc/param.cc initEnvFunc).
SYSTEM_CONF = "/etc/nccl.conf"


class Library(TypedDict):
    """One libnccl file (several paths may name it: ``aliases``)."""

    path: str                     # the libnccl.so.2 path found first, else the first path
    realpath: str                 # symlinks resolved inside the root
    aliases: list[str]            # other paths to the same file
    found_via: list[str]          # "LD_PRELOAD", "site-packages", "torch-lib", "LD_LIBRARY_PATH",
                                  # "ldconfig", "lib-dir", "cuda-dir", "NCCL_HOME", "opt-dir"
    version: Optional[str]        # "2.21.5", from ncclGetVersion
    version_code: Optional[int]   # 22105
    file_version: Optional[str]   # from the file name libnccl.so.2.21.5, when it has one
    error: Optional[str]          # why no version: not loadable, not NCCL, crashed, ...


class Torch(TypedDict):
    """torch as installed in one site-packages folder."""

    version: Optional[str]             # "2.4.1+cu121" (torch/version.py), else METADATA
    cuda: Optional[str]                # "12.1"; None for a CPU-only build
    git_version: Optional[str]
    path: str                          # ".../site-packages/torch"
    site_packages: str
    nccl_requirement: Optional[str]    # "nvidia-nccl-cu12==2.20.5" from Requires-Dist
    nccl_wheel: Optional[str]          # "nvidia-nccl-cu12" installed beside torch
    nccl_wheel_version: Optional[str]  # "2.20.5"


class Choice(TypedDict):
    """Which file a loader would pick, and why."""

    path: Optional[str]
    version: Optional[str]
    reason: str


class Plugin(TypedDict):
    """One NCCL plugin file."""

    path: str
    realpath: str
    name: str          # file name, "libnccl-net.so"
    kind: str          # "net", "tuner", "profiler", "env", "gin" or "other"
    found_via: list[str]


class ConfigFile(TypedDict):
    """One NCCL config file, in the order NCCL reads them."""

    path: str
    source: str                  # "NCCL_CONF_FILE", "home" or "system"
    values: dict[str, str]       # NAME -> value, exactly as NCCL would set them
    problems: list[str]          # lines NCCL reads differently from what they seem to say


class NcclData(TypedDict):
    """The ``nccl`` section's data."""

    libraries: list[Library]
    versions: list[str]                   # distinct versions, oldest first
    torch: Optional[Torch]
    torch_loads: Optional[Choice]
    system_loads: Optional[Choice]        # what the loader gives a program linked to libnccl.so.2
    net_plugins: list[Plugin]
    net_plugin: Choice                    # what NCCL's net plugin loader would open
    ibverbs: dict[str, Any]               # {"loaded", "path", "error", "devices", "providers", ...}
    config_files: list[ConfigFile]
    conf_env: dict[str, str]              # merged values; the first file read wins
    python: Optional[dict[str, Any]]      # the interpreter that was asked (python_paths)
    torch_nccl: Optional[dict[str, Any]]  # {"version", "error"}: torch.cuda.nccl.version(), asked
                                          # in a child process only when no libnccl is on disk


#: Asked of a CUDA torch when no libnccl is on disk (a build with NCCL linked in statically).
#: It runs in a child interpreter: ncclcheck itself never imports torch.
TORCH_NCCL_CODE = ("import torch; v = torch.cuda.nccl.version(); "
                   "print('.'.join(map(str, v)) if isinstance(v, tuple) else v)")
TORCH_NCCL_TIMEOUT_S = 60.0


# -- pure parsers ------------------------------------------------------------------------------

def parse_ldconfig(text: str) -> list[dict[str, str]]:
    """Entries of ``ldconfig -p`` output, in cache order (the order the loader tries them).

    Sample (NVIDIA/nccl#1991)::

        537 libs found in cache `/etc/ld.so.cache'
        \tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2

    >>> parse_ldconfig("2 libs found in cache `/etc/ld.so.cache'\\n"
    ...                "\\tlibnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2\\n"
    ...                "\\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib64/libc.so.6\\n")
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'name': 'libnccl.so.2', 'flags': 'libc6,x86-64',
      'path': '/lib/x86_64-linux-gnu/libnccl.so.2'},
     {'name': 'libc.so.6', 'flags': 'libc6,x86-64, OS ABI: Linux 3.2.0',
      'path': '/lib64/libc.so.6'}]
    >>> parse_ldconfig("garbage\\n => \\n")
    []
    """
    entries = []
    for line in text.splitlines():
        match = re.match(r"^\s+(\S+)\s+\(([^)]*)\)\s+=>\s+(/\S.*?)\s*$", line)
        if match:
            entries.append({"name": match.group(1), "flags": match.group(2),
                            "path": match.group(3)})
    return entries


def parse_ld_so_conf(text: str) -> tuple[list[str], list[str]]:
    """Folders and ``include`` patterns of an ld.so.conf file.

    Recorded /etc/ld.so.conf of Ubuntu 22.04 (``include /etc/ld.so.conf.d/*.conf``) and
    the CUDA 12.4 package's /etc/ld.so.conf.d/988_cuda-12.conf
    (``/usr/local/cuda-12/targets/x86_64-linux/lib``).

    >>> parse_ld_so_conf("include /etc/ld.so.conf.d/*.conf\\n\\n")
    ([], ['/etc/ld.so.conf.d/*.conf'])
    >>> parse_ld_so_conf("/usr/local/cuda-12/targets/x86_64-linux/lib\\n# comment\\n")
    (['/usr/local/cuda-12/targets/x86_64-linux/lib'], [])
    """
    dirs: list[str] = []
    includes: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and line[7:8].isspace():
            includes.extend(line[8:].split())
        elif line.startswith("/"):
            dirs.extend(d for d in re.split(r"[\s:,]+", line) if d.startswith("/"))
    return dirs, includes


def parse_torch_version_py(text: str) -> dict[str, Optional[str]]:
    """``__version__``, ``cuda`` and ``git_version`` from torch/version.py, without running it.

    Sample (torch 2.6.0+cu124 wheel)::

        __version__ = '2.6.0+cu124'
        debug = False
        cuda: Optional[str] = '12.4'
        git_version = '2236df1770800ffea5697b11b0bb0d910b2e59e1'

    >>> parse_torch_version_py("__version__ = '2.6.0+cu124'\\ncuda: Optional[str] = '12.4'\\n"
    ...                        "git_version = '2236df1770800ffea5697b11b0bb0d910b2e59e1'\\n")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'version': '2.6.0+cu124', 'cuda': '12.4',
     'git_version': '2236df1770800ffea5697b11b0bb0d910b2e59e1'}
    >>> parse_torch_version_py("__version__ = '2.13.0+cpu'\\ncuda: Optional[str] = None\\n")
    {'version': '2.13.0+cpu', 'cuda': None, 'git_version': None}
    """
    found: dict[str, Optional[str]] = {"version": None, "cuda": None, "git_version": None}
    names = {"__version__": "version", "cuda": "cuda", "git_version": "git_version"}
    for line in text.splitlines():
        match = re.match(r"^(\w+)\s*(?::[^=]*)?=\s*(.+?)\s*$", line)
        if not match or match.group(1) not in names:
            continue
        value = match.group(2)
        quoted = re.match(r"""^(['"])(.*)\1$""", value)
        found[names[match.group(1)]] = quoted.group(2) if quoted else None
    return found


def parse_dist_metadata(text: str) -> dict[str, Any]:
    """Name, Version and Requires-Dist of a METADATA / PKG-INFO file (headers only).

    Recorded: the header of the torch 2.4.1 wheel's METADATA (below, cut).

    Both requirement spellings occur: ``nvidia-nccl-cu12==2.21.5; ...`` and the older
    ``nvidia-nccl-cu12 (==2.20.5) ; ...`` (the torch 2.4.1 wheel's METADATA).

    >>> meta = parse_dist_metadata("Metadata-Version: 2.1\\nName: torch\\nVersion: 2.4.1\\n"
    ...     'Requires-Dist: nvidia-nccl-cu12 (==2.20.5) ; platform_system == "Linux"\\n\\nbody\\n')
    >>> meta["name"], meta["version"], nccl_requirement(meta["requires"])
    ('torch', '2.4.1', 'nvidia-nccl-cu12==2.20.5')
    """
    meta: dict[str, Any] = {"name": None, "version": None, "requires": []}
    for line in text.splitlines():
        if not line.strip():
            break  # the description body starts after the first blank line
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "name":
            meta["name"] = value
        elif key == "version":
            meta["version"] = value
        elif key == "requires-dist":
            meta["requires"].append(value)
    return meta


def nccl_requirement(requires: list[str]) -> Optional[str]:
    """The ``nvidia-nccl-cu*`` requirement among Requires-Dist values, as ``name==version``.

    >>> nccl_requirement(['nvidia-nccl-cu12==2.21.5; platform_system == "Linux"', 'sympy'])
    'nvidia-nccl-cu12==2.21.5'
    >>> nccl_requirement(["filelock"]) is None
    True
    """
    for req in requires:
        match = re.match(r"^\s*(nvidia[-_.]nccl[-_.]cu\d+)\s*\(?\s*([^;)]*?)\s*\)?\s*(;|$)", req,
                         re.IGNORECASE)
        if match:
            return match.group(1).lower().replace("_", "-") + match.group(2).replace(" ", "")
    return None


def parse_conf(text: str) -> tuple[dict[str, str], list[str]]:
    """Values of an NCCL config file, read the way NCCL reads it, plus suspicious lines.

    Recorded /etc/nccl.conf of a RoCE node on NCCL 2.18 (tests/fixtures/hosts/a100-roce-bond)::

        # RoCE v2 fabric: GID 3 is RoCE v2 over IPv4 on bond0
        NCCL_IB_GID_INDEX=3
        NCCL_SOCKET_IFNAME=bond0
        NCCL_IB_HCA=mlx5_bond_0

    NCCL (src/misc/param.cc ``setEnvFile``) skips lines starting with ``#``, splits at the first
    ``=``, strips nothing but the newline, and never overwrites a variable already set, so the
    first occurrence wins.

    >>> parse_conf("# RoCE v2 fabric: GID 3 is RoCE v2 over IPv4 on bond0\\nNCCL_IB_GID_INDEX=3\\n"
    ...            "NCCL_SOCKET_IFNAME=bond0\\nNCCL_IB_HCA=mlx5_bond_0\\n")
    ({'NCCL_IB_GID_INDEX': '3', 'NCCL_SOCKET_IFNAME': 'bond0', 'NCCL_IB_HCA': 'mlx5_bond_0'}, [])
    >>> parse_conf("NCCL_IB_GID_INDEX=3\\nNCCL_IB_GID_INDEX=0\\n")[0]  # the first one wins
    {'NCCL_IB_GID_INDEX': '3'}
    >>> parse_conf("export NCCL_DEBUG=INFO\\nNCCL_IB_HCA = mlx5_0\\n")[1]
    ... # doctest: +NORMALIZE_WHITESPACE
    ["line 1: name 'export NCCL_DEBUG' has spaces: NCCL sets that name, not the variable meant",
     "line 2: name 'NCCL_IB_HCA ' has spaces: NCCL sets that name, not the variable meant",
     "line 2: value ' mlx5_0' has surrounding spaces or quotes: NCCL keeps them"]
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            if line.strip():
                problems.append(f"line {number}: no '=': NCCL ignores it")
            continue
        name, value = name[:1023], value[:1023]
        if name != name.strip() or " " in name or "\t" in name:
            problems.append(f"line {number}: name {name!r} has spaces: NCCL sets that name, "
                            "not the variable meant")
        if value != value.strip() or value[:1] in ("'", '"'):
            problems.append(f"line {number}: value {value!r} has surrounding spaces or quotes: "
                            "NCCL keeps them")
        values.setdefault(name, value)
    return values, problems


def parse_ibverbs_driver(text: str) -> list[str]:
    """Driver names of an /etc/libibverbs.d/*.driver file (rdma-core dynamic_driver.c).

    Recorded /etc/libibverbs.d/mlx5.driver (rdma-core 39.0): ``driver mlx5``.

    >>> parse_ibverbs_driver("driver mlx5\\n"), parse_ibverbs_driver("# x\\nbogus\\n")
    (['mlx5'], [])
    """
    names = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "driver":
            names.append(fields[1])
    return names


def plugin_kind(name: str) -> str:
    """The plugin type a file name suggests (src/plugin/plugin_open.cc ``pluginPrefix``).

    >>> [plugin_kind(n) for n in ("libnccl-net.so", "libnccl-net-ofi.so", "libnccl-ofi-tuner.so",
    ...                           "libnccl-profiler-inspector.so", "libnccl-foo.so")]
    ['net', 'net', 'tuner', 'profiler', 'other']
    """
    for kind in ("net", "gin", "tuner", "profiler", "env"):
        if name.startswith(f"libnccl-{kind}"):
            return kind
    return "tuner" if "tuner" in name else "other"


def version_key(version: str) -> tuple[int, ...]:
    """Sort key for "2.21.5".

    >>> sorted(["2.9.9", "2.21.5", "2.18.3"], key=version_key)
    ['2.9.9', '2.18.3', '2.21.5']
    """
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def file_version(path: str) -> Optional[str]:
    """The version a file name carries, e.g. ``libnccl.so.2.21.5``.

    >>> file_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"), file_version("libnccl.so.2")
    ('2.21.5', None)
    """
    match = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path)
    return match.group(1) if match else None


# -- reading the host --------------------------------------------------------------------------

def _join(folder: str, name: str) -> str:
    return "/" + "/".join(p for p in (folder.strip("/"), name.strip("/")) if p)


def resolve(host: Host, path: str) -> str:
    """The real path of ``path`` inside the host root: every symlink component followed.

    Absolute link targets are taken inside the root, as the machine itself would see them; a
    link loop leaves the path as it is.
    """
    real = follow_links(path, host.readlink)
    return "/" + (real if real is not None else "/".join(p for p in path.split("/") if p))


def exists(host: Host, path: str) -> bool:
    """Whether ``path`` exists once its symlinks are followed inside the root."""
    return host.exists(resolve(host, path))


class _Finder:
    """Collects library and plugin files, with how each was found, in priority order."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.libs: dict[str, list[str]] = {}
        self.plugins: dict[str, list[str]] = {}
        self._listed: dict[str, list[str]] = {}

    def listdir(self, folder: str) -> list[str]:
        if folder not in self._listed:
            self._listed[folder] = self.host.listdir(folder)
        return self._listed[folder]

    def add(self, path: str, via: str, plugins: bool = True) -> None:
        name = path.rsplit("/", 1)[-1]
        if LIB_NAME.match(name):
            table = self.libs
        elif plugins and PLUGIN_NAME.match(name):
            table = self.plugins
        else:
            return
        vias = table.setdefault(path, [])
        if via not in vias:
            vias.append(via)

    def scan(self, folder: str, via: str, plugins: bool = True) -> None:
        for name in self.listdir(folder):
            if name.startswith("libnccl"):
                self.add(_join(folder, name), via, plugins)


def _env_dirs(value: Optional[str]) -> list[str]:
    return [d for d in (value or "").split(":") if d.startswith("/")]


def _ld_so_conf_dirs(host: Host) -> list[str]:
    dirs: list[str] = []
    pending = ["/etc/ld.so.conf"]
    seen: set[str] = set()
    while pending and len(seen) < 64:
        conf = pending.pop(0)
        if conf in seen:
            continue
        seen.add(conf)
        found, includes = parse_ld_so_conf(host.read(conf) or "")
        dirs.extend(d for d in found if d not in dirs)
        for pattern in includes:
            if not pattern.startswith("/"):
                pattern = "/etc/" + pattern
            folder, _, leaf = pattern.rpartition("/")
            pending.extend(sorted(_join(folder, n) for n in host.listdir(folder)
                                  if fnmatch.fnmatch(n, leaf)))
    return dirs


def _strings(python: Optional[dict[str, Any]], key: str) -> list[str]:
    """A list of absolute paths from the python_paths answer; [] when absent or malformed."""
    items = (python or {}).get(key)
    return [i for i in items if isinstance(i, str) and i.startswith("/")] \
        if isinstance(items, list) else []


def _python_dirs(host: Host, python: Optional[dict[str, Any]]) -> list[str]:
    dirs: list[str] = []
    for item in _strings(python, "sys_path") + _strings(python, "site_packages"):
        if item not in dirs:
            dirs.append(item)
    for base in PYTHON_BASES:
        for name in host.listdir(base):
            if name.startswith("python3"):
                for leaf in ("site-packages", "dist-packages"):
                    folder = _join(_join(base, name), leaf)
                    if folder not in dirs and host.isdir(folder):
                        dirs.append(folder)
    return dirs


def _torch_in(host: Host, sp: str, names: list[str]) -> Optional[Torch]:
    meta_dir = next((n for n in names if re.match(r"^torch-[^-]+\.(dist|egg)-info$", n)), None)
    if "torch" not in names and meta_dir is None:
        return None
    version_py = parse_torch_version_py(host.read(_join(sp, "torch/version.py")) or "")
    meta: dict[str, Any] = {"version": None, "requires": []}
    if meta_dir:
        leaf = "METADATA" if meta_dir.endswith(".dist-info") else "PKG-INFO"
        meta = parse_dist_metadata(host.read(_join(sp, f"{meta_dir}/{leaf}")) or "")
    if version_py["version"] is None and meta.get("version") is None:
        return None
    wheel, wheel_version = None, None
    for name in names:
        match = re.match(r"^(nvidia_nccl_cu\d+)-([^-]+)\.dist-info$", name)
        if match:
            wheel_meta = parse_dist_metadata(host.read(_join(sp, f"{name}/METADATA")) or "")
            wheel = (wheel_meta.get("name") or match.group(1)).lower().replace("_", "-")
            wheel_version = wheel_meta.get("version") or match.group(2)
            break
    return Torch(version=version_py["version"] or meta.get("version"), cuda=version_py["cuda"],
                 git_version=version_py["git_version"], path=_join(sp, "torch"),
                 site_packages=sp, nccl_requirement=nccl_requirement(meta.get("requires", [])),
                 nccl_wheel=wheel, nccl_wheel_version=wheel_version)


def _wheel_libs(finder: _Finder, sp: str, names: list[str]) -> list[str]:
    """libnccl files of the nvidia-nccl wheel(s) in one site-packages, best first."""
    if "nvidia" not in names:
        return []
    found = []
    cuda_dirs = [d for d in finder.listdir(_join(sp, "nvidia")) if re.match(r"^cu\d+$", d)]
    for sub in ["nccl", *cuda_dirs]:
        folder = _join(sp, f"nvidia/{sub}/lib")
        for name in sorted(finder.listdir(folder), key=lambda n: (n != SONAME, n)):
            if LIB_NAME.match(name) and re.search(r"\d$", name):
                found.append(_join(folder, name))
    return found


def _preloaded(env: dict[str, str]) -> list[str]:
    return [p for p in re.split(r"[\s:]+", env.get("LD_PRELOAD", "")) if p]


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Return :class:`NcclData` for the host."""
    env = host.environ()
    finder = _Finder(host)
    python: Optional[dict[str, Any]] = None
    try:
        python = host.query("python_paths")
        if not isinstance(python, dict):
            raise QueryFailed("the answer is not a mapping")
    except QueryFailed as exc:
        errors.append(f"python_paths: {exc}")
        python = None

    # Discovery runs in the loader's order of precedence, so found_via reads best first.
    preload = _preloaded(env)
    for entry in preload:
        if "/" in entry and LIB_NAME.match(entry.rsplit("/", 1)[-1]):
            if exists(host, entry):
                finder.add(entry, "LD_PRELOAD")
            else:
                errors.append(f"LD_PRELOAD names {entry}, which does not exist")
    torch, wheel_libs = _scan_python(finder, python)
    lookup = _scan_loader(finder, env, errors)
    _scan_install_dirs(finder, env)

    libraries = _libraries(host, finder, errors)
    by_real = {lib["realpath"]: lib for lib in libraries}
    by_path = {p: lib for lib in libraries for p in [lib["path"], *lib["aliases"]]}

    def version_of(path: Optional[str]) -> Optional[str]:
        lib = (by_path.get(path) or by_real.get(resolve(host, path))) if path else None
        return lib["version"] if lib else None

    plugins = [Plugin(path=p, realpath=resolve(host, p), name=p.rsplit("/", 1)[-1],
                      kind=plugin_kind(p.rsplit("/", 1)[-1]), found_via=via)
               for p, via in sorted(finder.plugins.items()) if exists(host, p)]
    config_files, conf_env = _config_files(host, env, python, errors)
    return dict(NcclData(
        libraries=libraries,
        versions=sorted({lib["version"] for lib in libraries if lib["version"]}, key=version_key),
        torch=torch,
        torch_loads=_torch_loads(torch, preload, wheel_libs, python, by_path, lookup, version_of),
        system_loads=_system_loads(preload, lookup, version_of),
        net_plugins=plugins, net_plugin=_net_plugin(env, lookup, host),
        ibverbs=_ibverbs(host, errors), config_files=config_files, conf_env=conf_env,
        python=python,
        torch_nccl=None if libraries else _ask_torch_nccl(host, torch, python)))


def parse_torch_nccl_version(text: str) -> Optional[str]:
    """The version ``torch.cuda.nccl.version()`` printed: a tuple joined by dots (torch >= 1.13)
    or NCCL's integer code (older torch).

    >>> parse_torch_nccl_version("2.21.5\\n"), parse_torch_nccl_version("21805")
    ('2.21.5', '2.18.5')
    >>> parse_torch_nccl_version("22105"), parse_torch_nccl_version("Traceback ...")
    ('2.21.5', None)
    """
    text = text.strip().splitlines()[-1].strip() if text.strip() else ""
    if re.fullmatch(r"\d+\.\d+\.\d+", text):
        return text
    if text.isdigit():
        code = int(text)
        if code >= 20900:  # NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z from 2.9 on
            return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return None


def _ask_torch_nccl(host: Host, torch: Optional[Torch],
                    python: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """torch.cuda.nccl.version() from the interpreter that holds this torch, or None when
    there is no CUDA torch to ask."""
    if not torch or not torch["cuda"] or not python or not python.get("executable"):
        return None
    if torch["site_packages"] not in (*_strings(python, "sys_path"),
                                      *_strings(python, "site_packages")):
        return {"version": None, "error": "torch is not in the probing interpreter's path"}
    result = host.run([str(python["executable"]), "-c", TORCH_NCCL_CODE],
                      timeout=TORCH_NCCL_TIMEOUT_S)
    version = parse_torch_nccl_version(result.stdout) if result.returncode == 0 else None
    if version:
        return {"version": version, "error": None}
    why = (result.stderr.strip().splitlines() or ["no answer"])[-1]
    return {"version": None, "error": f"torch.cuda.nccl.version(): {why[:200]}"}


def _scan_python(finder: _Finder, python: Optional[dict[str, Any]]
                 ) -> tuple[Optional[Torch], dict[str, list[str]]]:
    """The wheel copies of libnccl in every Python install, and the first torch."""
    torch: Optional[Torch] = None
    wheel_libs: dict[str, list[str]] = {}
    for sp in _python_dirs(finder.host, python):
        names = finder.listdir(sp)
        wheel_libs[sp] = _wheel_libs(finder, sp, names)
        for path in wheel_libs[sp]:
            finder.add(path, "site-packages", plugins=False)
        if torch is None:
            torch = _torch_in(finder.host, sp, names)
        if "torch" in names:
            finder.scan(_join(sp, "torch/lib"), "torch-lib", plugins=False)
    return torch, wheel_libs


def _scan_loader(finder: _Finder, env: dict[str, str], errors: list[str]) -> _Lookup:
    """What the dynamic loader searches: LD_LIBRARY_PATH, the ldconfig cache, its folders."""
    host = finder.host
    ld_library_path = _env_dirs(env.get("LD_LIBRARY_PATH"))
    for folder in ld_library_path:
        finder.scan(folder, "LD_LIBRARY_PATH")
    cache: Optional[list[dict[str, str]]] = None
    result = host.run(["ldconfig", "-p"])
    if result.returncode is None and not result.timed_out:
        result = host.run(["/sbin/ldconfig", "-p"])  # not on a user's PATH on Debian
    if result.ok:
        cache = parse_ldconfig(result.stdout)
        for entry in cache:
            if entry["name"].startswith("libnccl") and exists(host, entry["path"]):
                finder.add(entry["path"], "ldconfig")
    else:
        errors.append(f"ldconfig -p: {result.why_failed()}; read etc/ld.so.conf instead")
    conf_dirs = _ld_so_conf_dirs(host)
    for folder in [*conf_dirs, *("/" + d for d in TRUSTED_DIRS)]:
        finder.scan(folder, "lib-dir")
    return _Lookup(finder, ld_library_path, cache, conf_dirs)


def _scan_install_dirs(finder: _Finder, env: dict[str, str]) -> None:
    """CUDA folders, NCCL_HOME, /opt/nccl*, /usr/local/nccl* and the usual plugin folders."""
    cuda_roots = [_join("/usr/local", n) for n in finder.listdir("usr/local")
                  if n == "cuda" or n.startswith("cuda-")]
    cuda_roots += [env[k] for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k, "").startswith("/")]
    for base in cuda_roots:
        for sub in CUDA_SUBDIRS:
            finder.scan(_join(base, sub), "cuda-dir")
    if env.get("NCCL_HOME", "").startswith("/"):
        for sub in ("lib", "lib64", "build/lib"):
            finder.scan(_join(env["NCCL_HOME"], sub), "NCCL_HOME")
    for base in ("opt", "usr/local"):
        for name in finder.listdir(base):
            if name.lower().startswith("nccl"):
                for sub in ("lib", "lib64", "build/lib"):
                    finder.scan(_join(_join(base, name), sub), "opt-dir")
    for folder in EXTRA_DIRS:
        finder.scan("/" + folder, "opt-dir")


def _libraries(host: Host, finder: _Finder, errors: list[str]) -> list[Library]:
    grouped: dict[str, Library] = {}
    for path, vias in finder.libs.items():
        if not exists(host, path):
            continue
        real = resolve(host, path)
        lib = grouped.get(real)
        if lib is None:
            grouped[real] = Library(path=path, realpath=real, aliases=[], found_via=list(vias),
                                    version=None, version_code=None,
                                    file_version=file_version(real), error=None)
            continue
        if path != lib["path"] and path not in lib["aliases"]:
            lib["aliases"].append(path)
        lib["found_via"].extend(v for v in vias if v not in lib["found_via"])
    for lib in grouped.values():
        named = [p for p in [lib["path"], *lib["aliases"]] if p.endswith("/" + SONAME)]
        if named and named[0] != lib["path"]:  # show the soname path programs ask for
            lib["aliases"].remove(named[0])
            lib["aliases"].append(lib["path"])
            lib["path"] = named[0]
        lib["aliases"].sort()
    if not grouped:
        return []
    wanted = sorted(grouped)
    try:
        answer = host.query("lib_versions", wanted)
    except QueryFailed as exc:
        errors.append(f"lib_versions: {exc}")
        answer = {}
    if not isinstance(answer, dict):
        errors.append("lib_versions: answer is not a mapping")
        answer = {}
    for real, lib in grouped.items():
        got = answer.get(real)
        if not isinstance(got, dict):
            lib["error"] = "no version answer for this file"
        elif got.get("error"):
            lib["error"] = str(got["error"])
        elif isinstance(got.get("version_code"), int):
            lib["version_code"] = got["version_code"]
            lib["version"] = got.get("version")
    return list(grouped.values())


class _Lookup:
    """Finds a library by name the way the dynamic loader would (no RPATH)."""

    def __init__(self, finder: _Finder, ld_library_path: list[str],
                 cache: Optional[list[dict[str, str]]], conf_dirs: list[str]) -> None:
        self.finder = finder
        self.ld_library_path = ld_library_path
        self.cache = cache
        self.conf_dirs = conf_dirs

    def find(self, name: str) -> tuple[Optional[str], str]:
        """(path, how) for a bare library name; (None, why not) when nothing matches."""
        for folder in self.ld_library_path:
            if name in self.finder.listdir(folder):
                return _join(folder, name), f"LD_LIBRARY_PATH entry {folder}"
        if self.cache is not None:
            for entry in self.cache:
                if entry["name"] == name and exists(self.finder.host, entry["path"]):
                    return entry["path"], "the ldconfig cache"
        else:
            for folder in self.conf_dirs:
                if name in self.finder.listdir(folder):
                    return _join(folder, name), f"ld.so.conf folder {folder} (cache not read)"
        for folder in TRUSTED_DIRS:
            if name in self.finder.listdir(folder):
                return _join("/" + folder, name), f"the default folder /{folder}"
        return None, f"no {name} on LD_LIBRARY_PATH, in the ldconfig cache or the default folders"


def _preloaded_nccl(preload: list[str]) -> Optional[str]:
    return next((p for p in preload if LIB_NAME.match(p.rsplit("/", 1)[-1])), None)


def _torch_loads(torch: Optional[Torch], preload: list[str], wheel_libs: dict[str, list[str]],
                 python: Optional[dict[str, Any]], by_path: dict[str, Library], lookup: _Lookup,
                 version_of: Callable[[Optional[str]], Optional[str]]) -> Optional[Choice]:
    """The libnccl torch would load, in the order the loader and torch/__init__.py decide."""
    if torch is None:
        return None

    def choice(path: Optional[str], reason: str) -> Choice:
        return Choice(path=path, version=version_of(path), reason=reason)

    label = f"torch {torch['version']}"
    if torch["cuda"] is None:
        return choice(None, f"{label} is a CPU-only build (torch/version.py cuda = None): "
                            "it loads no NCCL")
    pre = _preloaded_nccl(preload)
    if pre:
        return choice(pre, f"LD_PRELOAD names {pre}: the loader maps it before torch starts, "
                           f"and torch's {SONAME} dependency binds to it")
    own = wheel_libs.get(torch["site_packages"]) or []
    if own:
        wheel = " ".join(filter(None, [torch["nccl_wheel"] or "nvidia-nccl",
                                        torch["nccl_wheel_version"]]))
        return choice(own[0], f"{label} loads the {wheel} wheel's copy beside it: its libraries "
                              "carry DT_RPATH $ORIGIN/../../nvidia/nccl/lib, which beats "
                              "LD_LIBRARY_PATH")
    for folder in _strings(python, "sys_path"):
        if wheel_libs.get(folder):
            return choice(wheel_libs[folder][0],
                          f"{label} has no NCCL wheel beside it; torch/__init__.py "
                          f"_preload_cuda_deps takes the first sys.path entry with "
                          f"nvidia/nccl/lib: {folder}")
    bundled = sorted(p for p in by_path if p.startswith(torch["path"] + "/lib/"))
    if bundled:
        return choice(bundled[0], f"{label} bundles {bundled[0].rsplit('/', 1)[-1]} in torch/lib")
    path, how = lookup.find(SONAME)
    if path is None:
        return choice(None, f"{label} (CUDA {torch['cuda']}) requires no NCCL wheel and the "
                            f"loader finds none: NCCL is linked into torch statically, or "
                            f"torch will fail to load ({how})")
    return choice(path, f"{label} requires no NCCL wheel: if it links {SONAME} dynamically "
                        f"(NGC or source builds), the loader finds {path} through {how}; "
                        "a static build uses its own copy")


def _system_loads(preload: list[str], lookup: _Lookup,
                  version_of: Callable[[Optional[str]], Optional[str]]) -> Optional[Choice]:
    """The libnccl.so.2 a program without RPATH (nccl-tests, a C++ job) gets."""
    pre = _preloaded_nccl(preload)
    if pre:
        return Choice(path=pre, version=version_of(pre), reason=f"LD_PRELOAD names {pre}")
    path, how = lookup.find(SONAME)
    if path is None:
        return None
    return Choice(path=path, version=version_of(path),
                  reason=f"a program linked to {SONAME} without RPATH gets it from {how}")


def _net_plugin(env: dict[str, str], lookup: _Lookup, host: Host) -> Choice:
    """The library NCCL's plugin loader opens (src/plugin/plugin_open.cc ``openPluginLib``)."""
    requested = env.get("NCCL_NET_PLUGIN")
    if requested is not None and requested.strip().lower() == "none":
        return Choice(path=None, version=None,
                      reason="NCCL_NET_PLUGIN=none: NCCL uses only its internal IB and Socket")
    names: list[str] = []
    for item in (requested.split(",") if requested else [""]):
        item = item.strip()
        if not item:
            names.append("libnccl-net.so")
            continue
        names.append(item)
        if "/" not in item and not (item.startswith("lib") and item.endswith(".so")):
            names.append(f"libnccl-net-{item}.so")
    tried = []
    for name in names:
        if "/" in name:
            if exists(host, name):
                return Choice(path=name, version=None, reason=f"NCCL_NET_PLUGIN names {name}")
            tried.append(f"{name} (missing)")
            continue
        path, how = lookup.find(name)
        if path:
            origin = "NCCL_NET_PLUGIN" if requested else "NCCL_NET_PLUGIN unset"
            return Choice(path=path, version=None,
                          reason=f"NCCL opens {name} ({origin}); the loader finds it in {how}")
        tried.append(name)
    missing = (f"{tried[0]} is not" if len(tried) == 1 else f"none of {', '.join(tried)} is")
    return Choice(path=None, version=None,
                  reason=f"{missing} on the loader path: NCCL uses its internal IB and Socket "
                         "transports")


def _ibverbs(host: Host, errors: list[str]) -> dict[str, Any]:
    drivers: list[str] = []
    files = []
    for entry in host.listdir("etc/libibverbs.d"):
        if entry.endswith(".driver"):
            files.append(f"/etc/libibverbs.d/{entry}")
            for name in parse_ibverbs_driver(host.read(f"etc/libibverbs.d/{entry}") or ""):
                if name not in drivers:
                    drivers.append(name)
    try:
        answer = host.query("verbs", drivers)
        if not isinstance(answer, dict) or not isinstance(answer.get("libibverbs"), dict):
            raise QueryFailed("the answer has no libibverbs entry")
    except QueryFailed as exc:
        errors.append(f"verbs: {exc}")
        return {"loaded": None, "path": None, "error": str(exc), "devices": None,
                "driver_files": files,
                "providers": [{"name": d, "loaded": None, "path": None, "error": None}
                              for d in drivers], "warnings": []}
    lib = answer["libibverbs"]
    devices = answer.get("devices")
    return {"loaded": lib.get("loaded"), "path": lib.get("path"), "error": lib.get("error"),
            "devices": devices if isinstance(devices, list) else None, "driver_files": files,
            "providers": [p for p in answer.get("providers") or [] if isinstance(p, dict)],
            "warnings": [w for w in answer.get("warnings") or [] if isinstance(w, str)]}


def _config_files(host: Host, env: dict[str, str], python: Optional[dict[str, Any]],
                  errors: list[str]) -> tuple[list[ConfigFile], dict[str, str]]:
    """NCCL_CONF_FILE (or ~/.nccl.conf when unset), then /etc/nccl.conf; first value wins."""
    order: list[tuple[str, str]] = []
    user_file = env.get("NCCL_CONF_FILE", "")
    if user_file:
        order.append((user_file, "NCCL_CONF_FILE"))
    elif isinstance((python or {}).get("home"), str) and python["home"].startswith("/"):
        order.append((_join(python["home"], ".nccl.conf"), "home"))
    order.append((SYSTEM_CONF, "system"))
    files: list[ConfigFile] = []
    merged: dict[str, str] = {}
    for path, source in order:
        text = host.read(path)
        if text is None:
            if source == "NCCL_CONF_FILE":
                errors.append(f"NCCL_CONF_FILE names {path}, which cannot be read")
            continue
        values, problems = parse_conf(text)
        if source == "NCCL_CONF_FILE" and not path.startswith("/"):
            problems.insert(0, "relative path: NCCL opens it from the job's working directory")
        files.append(ConfigFile(path=path, source=source, values=values, problems=problems))
        for key, value in values.items():
            merged.setdefault(key, value)
    return files, merged
