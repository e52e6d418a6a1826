"""Replaying a recording folder (``tests/fixtures/hosts/<name>``, ``ncclcheck record``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ncclcheck.errors import QueryFailed
from ncclcheck.host.envfilter import filter_environ
from ncclcheck.host.keys import command_key, file_key, query_key
from ncclcheck.host.live import LiveHost
from ncclcheck.host.protocol import DEFAULT_TIMEOUT_S, CommandResult
from ncclcheck.rootpaths import _inside, read_regular


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
