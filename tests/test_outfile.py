"""``-o``: a character device stays a device, a symlink stays a link, a FIFO reaches its reader.

Every device here is a private twin made with mknod under tmp_path, never the real /dev/null.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ncclcheck import outfile
from ncclcheck.errors import BadInput, NcclcheckError

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
needs_root = pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"),
                                reason="mknod needs root")


def ncclcheck(*args):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120)


def null_twin(folder: Path) -> Path:
    path = folder / "null"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    return path


@needs_root
def test_character_device_stays_a_device(tmp_path):
    dev = null_twin(tmp_path)
    outfile.write_atomic(dev, "{}\n")
    assert stat.S_ISCHR(dev.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temp file left


@needs_root
def test_cli_report_onto_a_device_twin_keeps_it(tmp_path):
    dev = null_twin(tmp_path)
    facts = tmp_path / "facts.json"
    assert ncclcheck("probe", "--replay", str(HOSTS / "h100-ib-8gpu"), "-o", str(facts)).returncode == 0
    out = ncclcheck("report", str(facts), "-o", str(dev))
    assert out.returncode == 0, out.stderr
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_symlink_is_kept_and_its_target_updated(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    outfile.write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert real.read_text() == "new" and stat.S_IMODE(real.stat().st_mode) == 0o640


def test_chain_of_symlinks_and_dangling_link(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("c")
    outfile.write_atomic(tmp_path / "a", "x")  # c does not exist yet: it is created
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert (tmp_path / "c").read_text() == "x"


def test_fifo_reaches_its_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    outfile.write_atomic(fifo, "hello\n" * 20000)  # more than a pipe buffer
    reader.join(10)
    assert got == ["hello\n" * 20000]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_fifo_without_reader_gives_up(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NcclcheckError, match="nobody read"):
        outfile.write_in_place(str(fifo), "x", deadline=0.2)


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, None),
])
def test_directory_refused_new_file_made(tmp_path, make, needle):
    target = tmp_path / "t"
    make(target)
    if needle:
        with pytest.raises(BadInput, match=needle):
            outfile.write_atomic(target, "x")
    else:
        outfile.write_atomic(target, "x")
        assert target.read_text() == "x"


def test_socket_refused(tmp_path):
    import socket

    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(BadInput, match="not a regular file"):
            outfile.write_atomic(path, "x")


def test_dev_stdout_is_dash(tmp_path):
    out = ncclcheck("probe", "--replay", str(HOSTS / "h100-ib-8gpu"), "-o", "/dev/stdout")
    assert out.returncode == 0, out.stderr
    assert '"schema": "ncclcheck/facts"' in out.stdout
    assert "written to" not in out.stderr


def test_long_name_is_exit_2(tmp_path):
    out = ncclcheck("probe", "--replay", str(HOSTS / "h100-ib-8gpu"), "-o", str(tmp_path / ("x" * 300)))
    assert out.returncode == 2 and "cannot write" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
