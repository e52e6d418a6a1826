"""Recording a live host: everything it touched, written in :class:`RecordedHost`'s layout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ncclcheck.errors import QueryFailed
from ncclcheck.host.keys import command_key, file_key, query_key
from ncclcheck.host.live import LiveHost
from ncclcheck.host.protocol import DEFAULT_TIMEOUT_S, CommandResult
from ncclcheck.rootpaths import rel


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
