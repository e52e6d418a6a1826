"""Native queries of the nccl probe, run for real: dlopen in a child, ncclGetVersion, verbs."""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.host.live import LiveHost
from ncclcheck.native import libs

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler to build test libraries")


def wheel_library() -> tuple[str, str]:
    dist = importlib.metadata.distribution("nvidia-nccl-cu12")
    return str(Path(dist.locate_file("nvidia/nccl/lib/libnccl.so.2")).resolve()), dist.version


def build(tmp_path: Path, name: str, source: str, soname: str | None = None) -> str:
    """Compile ``source`` into a shared library ``tmp_path/name``."""
    src = tmp_path / (name + ".c")
    src.write_text(source)
    out = tmp_path / name
    extra = [f"-Wl,-soname,{soname}"] if soname else []
    subprocess.run([CC, "-shared", "-fPIC", *extra, "-o", str(out), str(src)], check=True,
                   capture_output=True, timeout=60)
    return str(out)


@pytest.mark.parametrize("code,version", [
    (23203, "2.32.3"), (22105, "2.21.5"), (21803, "2.18.3"), (20906, "2.9.6"),
    (2804, "2.8.4"), (2708, "2.7.8"), (2304, "2.3.4"),
])
def test_decode_version_follows_the_nccl_version_macro(code, version):
    assert libs.decode_version(code) == version


def test_the_wheel_library_reports_its_package_version():
    path, version = wheel_library()
    answer = libs.lib_versions(LiveHost(), [path])
    assert answer[path]["version"] == version
    major, minor, patch = (int(p) for p in version.split(".")[:3])
    assert answer[path]["version_code"] == major * 10000 + minor * 100 + patch


def test_libraries_that_are_not_nccl_are_errors_not_crashes(tmp_path):
    path, version = wheel_library()
    libc_path = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
                                  "/usr/lib64/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6")
                      if os.path.exists(p)), None)
    garbage = tmp_path / "libnccl.so.2"
    garbage.write_bytes(b"not an ELF file at all\n" * 200)
    asked = [str(garbage), "/nonexistent/libnccl.so.2", path] + ([libc_path] if libc_path else [])
    answer = libs.lib_versions(LiveHost(), asked)
    assert list(answer) == asked
    assert "invalid ELF header" in answer[str(garbage)]["error"]
    assert "No such file" in answer["/nonexistent/libnccl.so.2"]["error"]
    assert answer[path]["version"] == version
    if libc_path:
        assert "not an NCCL library" in answer[libc_path]["error"]


def test_a_mounted_root_is_prefixed_and_hidden_from_errors(tmp_path):
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt/libnccl.so.2").write_bytes(b"junk")
    answer = libs.lib_versions(LiveHost(str(tmp_path)), ["/opt/libnccl.so.2", "/opt/none.so"])
    assert answer["/opt/libnccl.so.2"]["error"].startswith("/opt/libnccl.so.2: ")
    assert str(tmp_path) not in answer["/opt/none.so"]["error"]


@needs_cc
def test_fake_nccl_libraries_go_through_the_same_decoding(tmp_path):
    old = build(tmp_path, "libold.so", "int ncclGetVersion(int *v) { *v = 2708; return 0; }\n")
    failing = build(tmp_path, "libfail.so", "int ncclGetVersion(int *v) { return 5; }\n")
    answer = libs.lib_versions(LiveHost(), [old, failing])
    assert answer[old] == {"version": "2.7.8", "version_code": 2708, "rc": 0}
    assert answer[failing] == {"error": "ncclGetVersion returned 5"}


@needs_cc
def test_several_libnccl_so_2_in_one_child_each_answer_for_themselves(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = build(tmp_path / "a", "libnccl.so.2",
                  "int ncclGetVersion(int *v) { *v = 21803; return 0; }\n", soname="libnccl.so.2")
    second = build(tmp_path / "b", "libnccl.so.2",
                   "int ncclGetVersion(int *v) { *v = 22105; return 0; }\n", soname="libnccl.so.2")
    path, version = wheel_library()
    answer = libs.lib_versions(LiveHost(), [first, path, second])
    assert [answer[p].get("version") for p in (first, path, second)] == \
        ["2.18.3", version, "2.21.5"]


@needs_cc
@pytest.mark.slow
def test_a_library_that_kills_the_loader_does_not_hide_the_others(tmp_path):
    crasher = build(tmp_path, "libcrash.so",
                    "#include <stdlib.h>\n__attribute__((constructor)) static void boom(void)"
                    " { abort(); }\n")
    path, version = wheel_library()
    answer = libs.lib_versions(LiveHost(), [crasher, path])
    assert "crashed (signal 6)" in answer[crasher]["error"]
    assert answer[path]["version"] == version


@needs_cc
@pytest.mark.slow
def test_a_library_that_hangs_is_timed_out(tmp_path, monkeypatch):
    monkeypatch.setattr(libs, "CHILD_TIMEOUT_S", 1.0)
    hang = build(tmp_path, "libhang.so",
                 "#include <unistd.h>\n__attribute__((constructor)) static void nap(void)"
                 " { sleep(60); }\n")
    path, _ = wheel_library()
    answer = libs.lib_versions(LiveHost(), [hang, path])
    assert "timed out" in answer[hang]["error"]
    assert "not tried" in answer[path]["error"]


def test_library_chatter_on_stdout_does_not_break_the_answer(tmp_path):
    if CC is None:
        pytest.skip("needs a C compiler")
    chatty = build(tmp_path, "libchatty.so",
                   "#include <stdio.h>\n__attribute__((constructor)) static void hi(void)"
                   " { printf(\"{\\\"path\\\": \\\"forged\\\"}\\n\"); fflush(stdout); }\n"
                   "int ncclGetVersion(int *v) { *v = 22105; return 0; }\n")
    answer = libs.lib_versions(LiveHost(), [chatty])
    assert answer[chatty]["version"] == "2.21.5"


def test_python_paths_describe_this_interpreter():
    answer = libs.python_paths(LiveHost())
    assert answer["executable"] == sys.executable
    wheel_site = str(Path(importlib.metadata.distribution("nvidia-nccl-cu12").locate_file(""))
                     .resolve())
    assert wheel_site in [str(Path(p).resolve()) for p in answer["sys_path"]]
    assert os.path.isdir(answer["home"])


def test_verbs_on_this_machine():
    answer = libs.verbs(LiveHost(), [])
    lib = answer["libibverbs"]
    if ctypes.util.find_library("ibverbs") is None:
        assert lib["loaded"] is False and "libibverbs" in lib["error"]
        assert answer["devices"] is None
    else:
        assert lib["loaded"] is True and lib["path"].startswith("/")
        assert isinstance(answer["devices"], list)


@needs_cc
def test_verbs_providers_on_a_mounted_root(tmp_path):
    provider_dir = tmp_path / "usr/lib/x86_64-linux-gnu/libibverbs"
    provider_dir.mkdir(parents=True)
    build(provider_dir, "libfake-rdmav34.so", "int fake_provider_marker = 1;\n")
    (provider_dir / "libbroken-rdmav34.so").write_bytes(b"junk")
    answer = libs.verbs(LiveHost(str(tmp_path)), ["fake", "broken", "absent"])
    assert answer["libibverbs"]["loaded"] is False  # none under this root
    assert answer["devices"] is None                 # never this machine's devices
    providers = {p["name"]: p for p in answer["providers"]}
    assert providers["fake"] == {
        "name": "fake", "loaded": True, "error": None,
        "path": "/usr/lib/x86_64-linux-gnu/libibverbs/libfake-rdmav34.so"}
    assert providers["broken"]["loaded"] is False and providers["broken"]["error"]
    assert "no libabsent-rdmav*.so" in providers["absent"]["error"]
