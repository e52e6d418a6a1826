"""``recommend --verify``: prove with the real libnccl that NCCL reads the file and bootstraps
on the recommended interface.

A child Python (``python -I -S``, killed after a deadline) gets an environment without any
``NCCL_*`` variable except ``NCCL_CONF_FILE=<the env file>`` and ``NCCL_DEBUG=INFO``. It loads
libnccl, calls ``ncclGetVersion`` and ``ncclGetUniqueId`` (which needs no GPU: it only finds the
bootstrap interface and opens a listening socket on it, src/bootstrap.cc
``bootstrapGetUniqueId``), then reads back with libc ``getenv`` every variable of the file: NCCL's
reader (src/misc/param.cc ``setEnvFile``) put them into the process environment, so what
``getenv`` returns is exactly what NCCL understood.

Three things are checked:

* every variable reads back with the value the file meant (:func:`ncclcheck.envformat.parse_env_text`
  is what the file says; the child shows what NCCL did);
* NCCL's ``Bootstrap : Using <if>:<ip><n>`` log line names an interface of the recommended
  ``NCCL_SOCKET_IFNAME`` (``=`` exact list), or the default choice when the file sets none;
* the socket address inside the unique id (``ncclBootstrapHandle``: a 64-bit magic, then a
  ``sockaddr_in``/``sockaddr_in6``) is that interface's address.

``NCCL_CONF_FILE`` exists since NCCL 2.23; with an older library the variables are passed in the
child's environment instead, and the result says so (``method``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from ncclcheck.envformat import parse_env_text

VERIFY_TIMEOUT_S = 30.0
CONF_FILE_SINCE = (2, 23, 0)
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using ([^:\s]+):(\S+?)<\d+>")
_SET_BY_ENV = re.compile(r"(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?$")

_CHILD = r"""
import ctypes, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # NCCL logs to stdout by default: send it to stderr, keep our answer clean
job = json.loads(sys.argv[1])
answer = {"loaded": False}
try:
    lib = ctypes.CDLL(job["library"])
    answer["loaded"] = True
    code = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(code)) == 0:
        answer["version_code"] = code.value
    uid = ctypes.create_string_buffer(128)
    answer["rc"] = lib.ncclGetUniqueId(uid)
    if answer["rc"] == 0:
        answer["unique_id"] = uid.raw.hex()
    else:
        get_error = getattr(lib, "ncclGetLastError", None)
        if get_error is not None:
            get_error.restype = ctypes.c_char_p
            get_error.argtypes = [ctypes.c_void_p]
            text = get_error(None)
            answer["last_error"] = text.decode("utf-8", "replace") if text else ""
except OSError as exc:
    answer["error"] = str(exc)
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
libc.getenv.argtypes = [ctypes.c_char_p]
env = {}
for name in job["names"]:
    value = libc.getenv(name.encode())
    env[name] = None if value is None else value.decode("utf-8", "replace")
answer["environ"] = env
out.write(json.dumps(answer) + "\n")
out.flush()
libc.fflush(None)  # NCCL's log is C stdio on fd 1: flush it, then skip NCCL's exit handlers
os._exit(0)
"""


def decode_version(code: int) -> tuple[int, int, int]:
    """``ncclGetVersion``'s code as a tuple (codes from 2.9 on have five digits).

    >>> decode_version(23203), decode_version(2708)
    ((2, 32, 3), (2, 7, 8))
    """
    if code >= 10000:
        return code // 10000, (code % 10000) // 100, code % 100
    return code // 1000, (code % 1000) // 100, code % 100


def parse_unique_id(hex_bytes: str) -> dict[str, Any] | None:
    """The bootstrap socket address inside an ``ncclUniqueId``.

    Since NCCL 2.12 the id starts with ``ncclBootstrapHandle``: an 8-byte magic, then a
    ``union ncclSocketAddress``; older releases put the sockaddr first. Recorded from
    nvidia-nccl-cu12 2.32.3 bootstrapping on ``lo``:

    >>> parse_unique_id("a96304358ea22be70200be337f000001" + "00" * 112)
    {'family': 'inet', 'address': '127.0.0.1', 'port': 48691}
    >>> parse_unique_id("00" * 128) is None
    True
    """
    raw = bytes.fromhex(hex_bytes)
    for offset in (8, 0):
        if len(raw) < offset + 28:
            continue
        family = struct.unpack_from("<H", raw, offset)[0]
        port = struct.unpack_from(">H", raw, offset + 2)[0]
        if family == 2:
            return {"family": "inet", "address": str(ipaddress.IPv4Address(raw[offset + 4:offset + 8])),
                    "port": port}
        if family == 10:
            return {"family": "inet6",
                    "address": str(ipaddress.IPv6Address(raw[offset + 8:offset + 24])), "port": port}
    return None


def parse_bootstrap_line(log: str) -> dict[str, str] | None:
    """NCCL's bootstrap interface line (``Bootstrap : Using`` before 2.23, ``Bootstrap: Using``).

    >>> parse_bootstrap_line("h:1:1 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>")
    {'interface': 'lo', 'address': '127.0.0.1'}
    >>> parse_bootstrap_line("NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>")["interface"]
    'eth0'
    >>> parse_bootstrap_line("nothing") is None
    True
    """
    match = _BOOTSTRAP.search(log)
    if not match:
        return None
    return {"interface": match.group(1), "address": match.group(2).split("%")[0].strip("[]")}


def ifname_list(value: str | None) -> list[str] | None:
    """The exact names of an ``NCCL_SOCKET_IFNAME=<=a,b>`` value; None for prefix or ^ forms.

    >>> ifname_list("=eth0,ens5"), ifname_list("eth"), ifname_list(None)
    (['eth0', 'ens5'], None, None)
    """
    if not value or not value.startswith("="):
        return None
    return [n for n in value[1:].split(",") if n]


def find_libnccl(facts: dict[str, Any] | None = None, explicit: str | None = None) -> str | None:
    """The libnccl to verify with: ``explicit``, else the one torch loads per the facts, else
    the nvidia-nccl-cu12 wheel's, else one the facts list, else None."""
    if explicit:
        return explicit
    data = ((facts or {}).get("sections") or {}).get("nccl") or {}
    data = data.get("data") or {} if data.get("status") == "ok" else {}
    loads = data.get("torch_loads") or {}
    if isinstance(loads, dict) and loads.get("path") and os.path.exists(loads["path"]):
        return loads["path"]
    try:
        import nvidia.nccl  # type: ignore[import-not-found]  # the pip wheel, no torch needed

        for folder in list(getattr(nvidia.nccl, "__path__", [])):
            candidate = Path(folder) / "lib" / "libnccl.so.2"
            if candidate.exists():
                return str(candidate)
    except ImportError:
        pass
    for lib in data.get("libraries") or []:
        if isinstance(lib, dict) and lib.get("version") and os.path.exists(str(lib.get("path"))):
            return str(lib["path"])
    return None


def run_child(library: str, env_text: str, env_path: str, use_conf_file: bool,
              timeout: float) -> tuple[dict[str, Any], str]:
    """Run the child once; return (its JSON answer, its log)."""
    wanted = parse_env_text(env_text)
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("NCCL_") and k not in ("LD_PRELOAD",)}
    if use_conf_file:
        child_env["NCCL_CONF_FILE"] = os.path.abspath(env_path)
    else:
        child_env.update(wanted)
    child_env["NCCL_DEBUG"] = "INFO"
    child_env["NCCL_DEBUG_SUBSYS"] = "INIT,BOOTSTRAP,ENV,NET"
    job = {"library": library, "names": sorted(wanted)}
    argv = [sys.executable, "-I", "-S", "-c", _CHILD, json.dumps(job)]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=child_env,
                              stdin=subprocess.DEVNULL, check=False, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        log = (exc.stderr or b"").decode("utf-8", "replace")
        return {"error": f"timed out after {timeout:g}s"}, log
    log = proc.stderr.decode("utf-8", "replace")
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        try:
            return json.loads(line), log
        except ValueError:
            continue
    why = (f"the child died (signal {-proc.returncode})" if proc.returncode < 0
           else f"the child exited {proc.returncode} without an answer")
    return {"error": why}, log


def verify(env_path: str, library: str | None, timeout: float = VERIFY_TIMEOUT_S) -> dict[str, Any]:
    """Check ``env_path`` against ``library``; the result's ``ok`` says whether all checks pass.

    Returns:
        ``{"ok", "library", "nccl_version", "method", "bootstrap", "unique_id_address",
        "environ", "problems", "log_tail"}``; ``problems`` lists every failed check in words.
    """
    result: dict[str, Any] = {"ok": False, "library": library, "nccl_version": None,
                              "method": None, "bootstrap": None, "unique_id_address": None,
                              "environ": {}, "problems": [], "log_tail": []}
    problems: list[str] = result["problems"]
    if not library:
        problems.append("no libnccl found to verify with (pip install nvidia-nccl-cu12, or "
                        "--nccl-lib PATH)")
        return result
    try:
        env_text = Path(env_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{env_path}: cannot read ({exc})")
        return result
    wanted = parse_env_text(env_text)
    answer, log = run_child(library, env_text, env_path, True, timeout)
    version = decode_version(answer["version_code"]) if answer.get("version_code") else None
    if version is not None and version < CONF_FILE_SINCE:
        answer, log = run_child(library, env_text, env_path, False, timeout)
        result["method"] = "environment (NCCL < 2.23 has no NCCL_CONF_FILE)"
    else:
        result["method"] = "NCCL_CONF_FILE"
    result["log_tail"] = [line for line in log.splitlines() if "NCCL" in line][-20:]
    if version is not None:
        result["nccl_version"] = ".".join(map(str, version))
    if answer.get("error") or not answer.get("loaded"):
        problems.append(f"{library}: {answer.get('error') or 'did not load'}")
        return result
    environ = answer.get("environ") or {}
    result["environ"] = environ
    for name, value in wanted.items():
        if environ.get(name) != value:
            problems.append(f"{name}: the file says {value!r} but NCCL read {environ.get(name)!r}")
    if answer.get("rc") != 0:
        last = (answer.get("last_error") or "").strip()
        warn = [line.split("NCCL WARN", 1)[-1].strip() for line in log.splitlines()
                if "NCCL WARN" in line][-1:]
        problems.append(f"ncclGetUniqueId failed (ncclResult {answer.get('rc')})"
                        + (f": {last}" if last else "")
                        + (f"; NCCL WARN {warn[0]}" if warn and warn[0] not in last else ""))
        return result
    boot = parse_bootstrap_line(log)
    uid = parse_unique_id(answer.get("unique_id") or "")
    result["bootstrap"], result["unique_id_address"] = boot, uid
    expected = ifname_list(wanted.get("NCCL_SOCKET_IFNAME"))
    if boot is None:
        problems.append("NCCL printed no 'Bootstrap : Using <if>:<ip>' line")
    elif expected is not None and boot["interface"] not in expected:
        problems.append(f"NCCL bootstraps on {boot['interface']}, not on the recommended "
                        f"{', '.join(expected)}")
    if uid is None:
        problems.append("no socket address in the unique id")
    elif boot is not None and uid["address"] != boot["address"]:
        problems.append(f"the unique id holds {uid['address']}, the log says {boot['address']}")
    result["ok"] = not problems
    return result


def where_warnings(wanted: dict[str, str], facts: dict[str, Any] | None, here: str,
                   hosts: list[str], rdma_here: bool | None = None) -> list[str]:
    """What a passing check here does not prove: ``facts`` None means this machine is not one
    of ``hosts`` (the check ran on interfaces the nodes may not have); IB settings checked on a
    machine without an RDMA device were read, never used (ncclGetUniqueId only bootstraps over
    sockets, src/bootstrap.cc). ``rdma_here``: whether this machine has one, when no facts say.

    >>> where_warnings({"NCCL_IB_HCA": "=mlx5_0"}, None, "laptop", ["n1", "n2"], False)[1][:45]
    'this machine has no RDMA device: NCCL read NC'
    """
    out = []
    if facts is None:
        shown = ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else "")
        out.append(f"this machine ({here}) is not one of the nodes ({shown}): the check ran "
                   "here, where their interfaces may not exist; run --verify on a node")
    ib_vars = [k for k in wanted if k.startswith("NCCL_IB_")]
    if str(wanted.get("NCCL_NET", "")).upper() == "IB":
        ib_vars.insert(0, "NCCL_NET")
    if facts is not None:
        ib = ((facts.get("sections") or {}).get("ib") or {})
        rdma_here = ib.get("status") == "ok" and bool((ib.get("data") or {}).get("devices"))
    elif rdma_here is None:
        try:
            rdma_here = bool(os.listdir("/sys/class/infiniband"))
        except OSError:
            rdma_here = False
    if ib_vars and not rdma_here:
        out.append(f"this machine has no RDMA device: NCCL read {', '.join(ib_vars)} but the "
                   "check could not use them (ncclGetUniqueId bootstraps over sockets only); "
                   "run --verify on a node with the HCAs, or bench there")
    return out
