"""Native queries for the ``nccl`` probe: library versions, Python paths, libibverbs.

Loading a foreign library can crash or hang the process that loads it, so every ``dlopen``
happens in ONE short-lived child Python (``python -I -S -c <script>``) per query, bounded by a
timeout. The child prints one JSON line per library on a private copy of its stdout (the
libraries' own chatter goes to stderr). When a library kills the child, the parent marks that
library and starts a new child for the rest, so one bad file never hides the others.

* ``lib_versions(host, paths)``: ``ncclGetVersion`` of each libnccl. It needs no GPU and no
  driver: libnccl links only libc, libstdc++, pthread, rt and dl.
* ``python_paths(host)``: where this interpreter looks for packages (torch's wheel copy of
  libnccl lives in ``site-packages/nvidia/nccl/lib``), and the user's home directory from the
  password database (NCCL reads ``~/.nccl.conf`` from there, src/misc/param.cc ``userHomeDir``).
* ``verbs(host, drivers)``: whether libibverbs and its provider libraries load, the way NCCL
  (src/misc/ibvsymbols.cc: ``libibverbs.so`` then ``libibverbs.so.1``) and libibverbs
  (rdma-core libibverbs/dynamic_driver.c: ``<provider dir>/lib<name>-rdmav<ABI>.so``) open them.

Paths in questions and answers are machine paths (``/usr/lib/...``); for a host mounted
elsewhere (``root != "/"``) the child opens ``<root>/<path>``.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

from ncclcheck.errors import QueryFailed

#: Seconds one query may spend in its child processes, all retries together.
CHILD_TIMEOUT_S = 10.0

#: Library folders libibverbs and its providers are looked for in, for a mounted root.
LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu",
            "lib/aarch64-linux-gnu", "usr/lib64", "lib64", "usr/lib", "lib", "usr/local/lib")

#: The child: reads a job on stdin, prints one JSON line per item on a private stdout.
_CHILD = r"""
import ctypes, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # whatever the libraries print goes to stderr, never into our answer
job = json.loads(sys.stdin.read())

def say(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()

def why(exc):
    return str(exc).strip() or type(exc).__name__

for path in job.get("nccl", []):
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        say({"path": path, "error": why(exc)})
        continue
    try:
        fn = lib.ncclGetVersion
    except AttributeError:
        say({"path": path, "error": "no ncclGetVersion symbol: not an NCCL library"})
        continue
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
    code = ctypes.c_int(0)
    say({"path": path, "rc": fn(ctypes.byref(code)), "version_code": code.value})

verbs = job.get("verbs")
if verbs is not None:
    handle, errors = None, []
    for name in verbs["libibverbs"]:
        try:
            handle = ctypes.CDLL(name, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            break
        except OSError as exc:
            errors.append(why(exc))
    path = None
    if handle is not None:
        try:
            with open("/proc/self/maps") as maps:
                for line in maps:
                    if "libibverbs.so" in line and "/" in line:
                        path = line[line.index("/"):].strip()
                        break
        except OSError:
            pass
    devices = None
    if handle is not None and verbs.get("list_devices"):
        try:
            get = handle.ibv_get_device_list
            get.restype = ctypes.POINTER(ctypes.c_void_p)
            get.argtypes = [ctypes.POINTER(ctypes.c_int)]
            name_of = handle.ibv_get_device_name
            name_of.restype = ctypes.c_char_p
            name_of.argtypes = [ctypes.c_void_p]
            count = ctypes.c_int(0)
            array = get(ctypes.byref(count))
            if array:
                devices = [name_of(array[i]).decode("utf-8", "replace")
                           for i in range(count.value)]
                free = handle.ibv_free_device_list
                free.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
                free(array)
            else:
                devices = []
        except (AttributeError, OSError) as exc:
            errors.append(why(exc))
    say({"libibverbs": {"loaded": handle is not None, "path": path,
                        "error": None if handle is not None else "; ".join(errors)},
         "devices": devices})
    import glob
    for provider in verbs["providers"]:
        # libibverbs' own provider folder (VERBS_PROVIDER_DIR) is <its libdir>/libibverbs
        cands = []
        if path:
            pattern = os.path.join(os.path.dirname(path), "libibverbs",
                                   "lib" + glob.escape(provider["name"]) + "-rdmav*.so")
            cands = sorted(glob.glob(pattern))
        seen = {os.path.realpath(c) for c in cands}
        cands += [c for c in provider["candidates"] if os.path.realpath(c) not in seen]
        if not cands:
            say({"provider": provider["name"], "loaded": False, "path": None,
                 "error": provider["missing"]})
            continue
        for i, cand in enumerate(cands):
            try:
                ctypes.CDLL(cand, mode=os.RTLD_NOW)
                say({"provider": provider["name"], "loaded": True, "path": cand, "error": None})
                break
            except OSError as exc:
                if i == len(cands) - 1:
                    say({"provider": provider["name"], "loaded": False, "path": cand,
                         "error": why(exc)})
"""


def decode_version(code: int) -> str:
    """Turn an ``ncclGetVersion`` code into ``"major.minor.patch"``.

    nccl.h: ``NCCL_VERSION(X,Y,Z) = (X <= 2 && Y <= 8) ? X*1000 + Y*100 + Z
    : X*10000 + Y*100 + Z``, so codes from 2.9 on have five digits.

    >>> decode_version(23203), decode_version(22105), decode_version(2708)
    ('2.32.3', '2.21.5', '2.7.8')
    """
    if code >= 10000:
        major, minor, patch = code // 10000, (code % 10000) // 100, code % 100
    else:
        major, minor, patch = code // 1000, (code % 1000) // 100, code % 100
    return f"{major}.{minor}.{patch}"


def _on_root(host: Any, path: str) -> str:
    root = getattr(host, "root", "/") or "/"
    if os.path.abspath(root) == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def _run_child(job: dict[str, Any], deadline: float) -> tuple[list[dict[str, Any]], str, str]:
    """Run the child once; return (answers, stderr, why it ended early or '')."""
    left = deadline - time.monotonic()
    if left <= 0:
        return [], "", f"timed out after {CHILD_TIMEOUT_S:g}s"
    argv = [sys.executable, "-I", "-S", "-c", _CHILD]
    try:
        proc = subprocess.run(argv, input=json.dumps(job).encode(), capture_output=True,
                              timeout=left, check=False)
        stdout, stderr, ended = proc.stdout, proc.stderr, ""
        if proc.returncode < 0:
            ended = f"the loader crashed (signal {-proc.returncode})"
        elif proc.returncode:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            ended = f"child exit {proc.returncode}" + (f": {tail[-1][:200]}" if tail else "")
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = exc.stdout or b"", exc.stderr or b""
        ended = f"timed out after {CHILD_TIMEOUT_S:g}s"
    except OSError as exc:
        raise QueryFailed(f"cannot start {sys.executable}: {exc}") from exc
    answers = []
    for line in stdout.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            answers.append(item)
    return answers, stderr.decode("utf-8", "replace"), ended


def lib_versions(host: Any, paths: list[str]) -> dict[str, dict[str, Any]]:
    """``ncclGetVersion`` of each library in ``paths`` (machine paths), in child processes.

    Returns ``{path: {"version": "2.21.5", "version_code": 22105, "rc": 0}}``, or
    ``{path: {"error": "..."}}`` for a file that does not load, is not NCCL, or crashed or hung
    the child. Never raises for one bad library.
    """
    paths = [str(p) for p in paths]
    real = {_on_root(host, p): p for p in paths}
    answers: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    todo = list(real)
    while todo:
        got, _, ended = _run_child({"nccl": todo}, deadline)
        for item in got:
            path = real.get(item.get("path")) if isinstance(item.get("path"), str) else None
            if path is None:
                continue
            if "error" in item:  # name the file as the machine does, not by its mount
                answers[path] = {"error": str(item["error"]).replace(item["path"], path)}
            elif item.get("rc") != 0:
                answers[path] = {"error": f"ncclGetVersion returned {item.get('rc')}"}
            else:
                code = int(item["version_code"])
                answers[path] = {"version": decode_version(code), "version_code": code, "rc": 0}
        todo = [p for p in todo if real[p] not in answers]
        if not todo:
            break
        culprit = todo.pop(0)
        answers[real[culprit]] = {"error": ended or "no answer from the loader"}
        if "timed out" in ended:
            for rest in todo:
                answers[real[rest]] = {"error": f"not tried: {ended} on {real[culprit]}"}
            break
    return {p: answers[p] for p in paths}


def python_paths(host: Any) -> dict[str, Any]:
    """Where this Python finds packages, and the user's home directory.

    ``sys_path`` keeps ``sys.path`` order (the order torch searches for its ``nvidia/*`` wheels);
    ``site_packages`` adds the install folders of ``sysconfig`` and ``site``.
    """
    import site
    import sysconfig

    def dirs(items: list[str]) -> list[str]:
        seen: list[str] = []
        for item in items:
            if item and os.path.isdir(item):
                full = os.path.abspath(item)
                if full not in seen:
                    seen.append(full)
        return seen

    scheme = sysconfig.get_paths()
    candidates = [scheme.get("purelib", ""), scheme.get("platlib", "")]
    try:
        candidates += list(site.getsitepackages())
    except AttributeError:  # virtualenv's old site.py
        pass
    try:
        candidates.append(site.getusersitepackages())
    except AttributeError:
        pass
    try:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        home = os.path.expanduser("~")
    return {"executable": sys.executable, "version": platform.python_version(),
            "prefix": sys.prefix, "sys_path": dirs(list(sys.path)),
            "site_packages": dirs(candidates), "home": home}


def _provider_candidates(host: Any, name: str) -> list[str]:
    """Files libibverbs would open for driver ``name``, as paths this process can open."""
    if name.startswith("/"):
        return sorted(glob.glob(glob.escape(_on_root(host, name)) + "-rdmav*.so"))
    found: list[str] = []
    for libdir in LIB_DIRS:
        for folder in (f"{libdir}/libibverbs", libdir):
            pattern = os.path.join(_on_root(host, "/" + folder),
                                   f"lib{glob.escape(name)}-rdmav*.so")
            for match in sorted(glob.glob(pattern)):
                real = os.path.realpath(match)
                if real not in (os.path.realpath(f) for f in found):
                    found.append(match)
    return found


def verbs(host: Any, drivers: list[str]) -> dict[str, Any]:
    """Whether libibverbs loads, which RDMA devices it lists, and whether each provider loads.

    ``drivers`` are the names of ``/etc/libibverbs.d/*.driver`` files, as the nccl probe reads
    them (:func:`ncclcheck.probes.nccl.verbs.parse_ibverbs_driver`); they are part of the
    question, so a recording answers for the drivers it saw. Devices are listed
    (``ibv_get_device_list``) only on the live root: for a mounted root they would be this
    machine's.
    """
    names = [str(d) for d in drivers]
    live = os.path.abspath(getattr(host, "root", "/") or "/") == "/"
    if live:
        libibverbs = ["libibverbs.so", "libibverbs.so.1"]
    else:
        libibverbs = [p for d in LIB_DIRS for p in
                      [_on_root(host, f"/{d}/libibverbs.so.1")] if os.path.exists(p)]
        if not libibverbs:
            libibverbs = [_on_root(host, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1")]
    providers = []
    for name in names:
        cands = _provider_candidates(host, name)
        providers.append({"name": name, "candidates": cands,
                          "missing": f"no lib{name}-rdmav*.so in the provider folders"})
    got, stderr, ended = _run_child(
        {"verbs": {"libibverbs": libibverbs, "providers": providers, "list_devices": live}},
        time.monotonic() + CHILD_TIMEOUT_S)
    head = next((g for g in got if "libibverbs" in g), None)
    if head is None:
        raise QueryFailed(f"verbs: {ended or 'no answer from the loader'}")
    root = getattr(host, "root", "/")
    strip = (lambda p: p) if live else (
        lambda p: "/" + os.path.relpath(p, root) if p and p.startswith(root) else p)
    lib = head["libibverbs"]
    if lib.get("path"):
        lib["path"] = strip(lib["path"])
    loaded = {g["provider"]: g for g in got if "provider" in g}
    out_providers = []
    for name in names:
        g = loaded.get(name)
        if g is None:
            g = {"loaded": False, "path": None,
                 "error": ended or "no answer from the loader"}
        out_providers.append({"name": name, "loaded": bool(g["loaded"]),
                              "path": strip(g.get("path")), "error": g.get("error")})
    warnings = [line.strip() for line in stderr.splitlines() if line.startswith("libibverbs:")]
    return {"libibverbs": lib, "devices": head.get("devices"), "providers": out_providers,
            "warnings": warnings[:20]}
