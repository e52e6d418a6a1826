"""Whether libibverbs and its providers load (etc/libibverbs.d/*.driver, native query ``verbs``)."""

from __future__ import annotations

from typing import Any

from ncclcheck.errors import QueryFailed
from ncclcheck.host.protocol import Host



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
