"""limits probe: systemd-logind's RemoveIPC read through the rooted reader from a recorded
folder (the logind.conf texts are NCCL's troubleshooting page's fix and systemd's shipped file
with every line commented out)."""

from __future__ import annotations

import json
from pathlib import Path

from ncclcheck.host.recorded import RecordedHost
from ncclcheck.probes import limits
from ncclcheck.rules import limits_remove_ipc
from ncclcheck.rules.engine import evaluate

SHIPPED = "[Login]\n#NAutoVTs=6\n#KillUserProcesses=no\n#RemoveIPC=yes\n#InhibitorsMax=8192\n"


def folder(tmp_path: Path, files: dict[str, str]) -> RecordedHost:
    for rel, text in files.items():
        path = tmp_path / "root" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "environ.json").write_text(json.dumps({}))
    return RecordedHost(tmp_path)


def judged(data: dict) -> list[str]:
    doc = {"hostname": "n1", "sections": {"limits": {"status": "ok", "data": data}}}
    return [f["severity"] for f in evaluate([limits_remove_ipc.RULE], [doc])["findings"]]


def test_systemd_default_is_yes_and_a_dropin_wins(tmp_path):
    host = folder(tmp_path, {"usr/lib/systemd/systemd-logind": "",
                             "run/systemd/system/.keep": "",  # booted with systemd
                             "etc/systemd/logind.conf": SHIPPED})
    data = limits.collect(host, [])
    assert data["remove_ipc"] == {"logind": True, "value": True, "source": "systemd default"}
    assert judged(data) == ["warning"]
    (tmp_path / "root/etc/systemd/logind.conf.d").mkdir()
    (tmp_path / "root/etc/systemd/logind.conf.d/nccl.conf").write_text("[Login]\nRemoveIPC=no\n")
    data = limits.collect(RecordedHost(tmp_path), [])
    assert data["remove_ipc"]["value"] is False
    assert data["remove_ipc"]["source"] == "/etc/systemd/logind.conf.d/nccl.conf"
    assert judged(data) == []


def test_no_logind_no_finding(tmp_path):
    data = limits.collect(folder(tmp_path, {"etc/systemd/logind.conf": SHIPPED}), [])
    assert data["remove_ipc"] == {"logind": False, "value": None, "source": None}
    assert judged(data) == []
    # installed but not running (a container image): not this machine's problem
    (tmp_path / "root/usr/lib/systemd").mkdir(parents=True)
    (tmp_path / "root/usr/lib/systemd/systemd-logind").write_text("")
    data = limits.collect(RecordedHost(tmp_path), [])
    assert data["remove_ipc"]["logind"] is False and judged(data) == []
