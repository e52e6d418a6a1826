"""cuda probe: toolkit and runtime versions (issue 19: probe never showed them, collect_env does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.host.live import LiveHost
from ncclcheck.host.protocol import Unavailable
from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probes import cuda

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
#: The head of a CUDA 12.4.1 toolkit's version.json, as the installer writes it.
VERSION_JSON = ('{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "12.4.1"\n   },\n'
                '   "cuda_cudart" : {\n      "name" : "CUDA Runtime (cudart)",\n'
                '      "version" : "12.4.127"\n   }\n}\n')
GARBAGE = [None, "", "garbage", "{}", "[]", '{"cuda": 3}', "\x00\xff"]


@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_never_raise_on_garbage(text):
    cuda.parse_version_json(text or "")
    cuda.parse_version_txt(text or "")
    cuda.cudart_file_version(text or "")


def make_tree(root: Path) -> None:
    """A toolkit (with the /usr/local/cuda link), a distribution libcudart and a pip wheel."""
    kit = root / "usr/local/cuda-12.4"
    (kit / "targets/x86_64-linux/lib").mkdir(parents=True)
    (kit / "version.json").write_text(VERSION_JSON)
    (kit / "targets/x86_64-linux/lib/libcudart.so.12.4.127").write_bytes(b"\x7fELF")
    (kit / "compat").mkdir()  # the cuda-compat-12-4 package's forward-compatibility libcuda
    (kit / "compat/libcuda.so.550.54.15").write_bytes(b"\x7fELF")
    os.symlink("libcuda.so.550.54.15", kit / "compat/libcuda.so.1")
    os.symlink("libcudart.so.12.4.127", kit / "targets/x86_64-linux/lib/libcudart.so.12")
    os.symlink("targets/x86_64-linux/lib", kit / "lib64")
    os.symlink("cuda-12.4", root / "usr/local/cuda")
    old = root / "usr/local/cuda-10.2"
    old.mkdir()
    (old / "version.txt").write_text("CUDA Version 10.2.89\n")
    system = root / "usr/lib/x86_64-linux-gnu"
    system.mkdir(parents=True)
    (system / "libcudart.so.11.7.99").write_bytes(b"\x7fELF")
    sp = root / "usr/lib/python3.11/site-packages"
    (sp / "nvidia/cuda_runtime/lib").mkdir(parents=True)
    (sp / "nvidia/cuda_runtime/lib/libcudart.so.12").write_bytes(b"\x7fELF")
    (sp / "nvidia_cuda_runtime_cu12-12.1.105.dist-info").mkdir()


def test_toolkits_and_runtimes_of_a_tree(tmp_path):
    make_tree(tmp_path)
    errors: list[str] = []
    data = cuda.collect(LiveHost(str(tmp_path), env={}), errors)
    kits = {t["path"]: t for t in data["toolkits"]}
    assert kits["/usr/local/cuda-12.4"] == {
        "path": "/usr/local/cuda-12.4", "version": "12.4.1", "cudart_version": "12.4.127",
        "source": "version.json", "aliases": ["/usr/local/cuda"], "compat": "550.54.15"}
    assert kits["/usr/local/cuda-10.2"]["version"] == "10.2.89"
    assert kits["/usr/local/cuda-10.2"]["compat"] is None
    runtimes = {r["path"]: (r["version"], r["found_via"]) for r in data["runtimes"]}
    assert runtimes == {
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127": ("12.4.127",
                                                                                "toolkit"),
        "/usr/lib/x86_64-linux-gnu/libcudart.so.11.7.99": ("11.7.99", "system"),
        "/usr/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12":
            ("12.1.105", "pip wheel")}


def test_no_cuda_is_unavailable(tmp_path):
    (tmp_path / "usr/local").mkdir(parents=True)
    with pytest.raises(Unavailable, match="no CUDA toolkit"):
        cuda.collect(LiveHost(str(tmp_path), env={}), [])


def test_recorded_h100_shows_its_runtime():
    data = cuda.collect(RecordedHost(HOSTS / "h100-ib-8gpu"), [])
    assert [(r["path"].rsplit("/", 1)[-1], r["version"]) for r in data["runtimes"]] == [
        ("libcudart.so.12.4.127", "12.4.127")]


def test_probe_prints_the_versions(tmp_path):
    make_tree(tmp_path)
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--root", str(tmp_path),
                          "--only", "cuda"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "160"})
    assert out.returncode == 0, out.stderr
    assert "toolkit /usr/local/cuda-12.4 (/usr/local/cuda)" in out.stdout
    assert "12.4.1 (cudart 12.4.127)" in out.stdout
    assert "libcudart 11.7.99 (system)" in out.stdout
    doc = json.loads(subprocess.run([sys.executable, "-m", "ncclcheck", "probe", "--root",
                                     str(tmp_path), "--only", "cuda", "--json"],
                                    capture_output=True, text=True, timeout=60).stdout)
    assert doc["sections"]["cuda"]["status"] == "ok"
