"""Which line signatures can match a line: one combined pattern over every keyword (issue 24).

Every line signature has ``keywords``, one of which must be in a line before its regexes run
(:meth:`~ncclcheck.signatures.base.Signature.match`). Trying each signature in turn costs one
loop per signature and one substring test per keyword (65 of them) on every WARN and text line.
:class:`Dispatch` compiles all the keywords into one regex, a trie of alternatives (``Co(?:nnect
to|...)``), so that one ``search`` in C says whether any keyword is in the line; most lines have
none and try no signature at all. A line that has one tries only the signatures whose keywords it
holds, in their reporting order. The result is the same as trying every signature:
``tests/diagnose/test_dispatch.py`` checks it on every fixture.
"""

from __future__ import annotations

import re
from ncclcheck.signatures.base import Signature


def trie_pattern(words: list[str]) -> str:
    """A regex matching exactly where one of ``words`` starts, factored as a trie.

    >>> p = re.compile(trie_pattern(["Call to connect", "Call to ibv_", "Cuda failure", "Got"]))
    >>> p.pattern
    '(?:C(?:all\\\\ to\\\\ (?:connect|ibv_)|uda\\\\ failure)|Got)'
    >>> bool(p.search("x Call to ibv_reg_mr")), bool(p.search("Call to close"))
    (True, False)
    """
    trie: dict[str, dict] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        if "" in node:
            return ""                    # a word ends here: any longer word holds it
        alts = [re.escape(ch) + emit(child) for ch, child in node.items()]
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return emit(trie)


MAX_MEMO = 4096                 #: texts memoised per dispatch; cleared when full
_ZEROS = bytes.maketrans(b"123456789", b"000000000")


class Dispatch:
    """The signatures of ``sigs`` that can match a line (see the module docstring)."""

    def __init__(self, sigs: tuple[Signature, ...]) -> None:
        self.sigs = sigs
        self.always = tuple(s for s in sigs if not s.keywords)
        words = sorted({k for s in sigs for k in s.keywords})
        self._search = re.compile(trie_pattern(words)).search if words else None
        self._numbered = tuple(w for w in words if any(c.isdigit() for c in w))
        self._memo: dict[bytes, tuple[Signature, ...]] = {}

    def __call__(self, text: str) -> tuple[Signature, ...]:
        """The signatures to try on ``text``, in ``sigs`` order.

        Memoised on ``text`` with its ASCII digits made ``0`` (issue 24: PyTorch's lines differ
        only in times and numbers, and the search costs ~7 us a line): a keyword without a digit
        is in the text exactly when it is in that key. A text holding a keyword with a digit
        (``[Errno 12]``) is not memoised.

        >>> from ncclcheck.signatures import LINE_DISPATCH as d
        >>> d("[I1261 12:06:11.6 ProcessGroupNCCL.cpp:1003] size: 128") is d("[I9 1:1:1.1 ProcessGroupNCCL.cpp:7] size: 2")
        True
        """
        if any(w in text for w in self._numbered):
            return self._find(text)
        key = text.encode("utf-8", "surrogatepass").translate(_ZEROS)
        got = self._memo.get(key)
        if got is None:
            if len(self._memo) >= MAX_MEMO:
                self._memo.clear()
            got = self._memo[key] = self._find(text)
        return got

    def _find(self, text: str) -> tuple[Signature, ...]:
        search = self._search
        if search is None or search(text) is None:
            return self.always
        return tuple(s for s in self.sigs
                     if not s.keywords or any(k in text for k in s.keywords))

