"""Kubernetes label keys and values, checked locally before any request (pure).

The rules are apimachinery's (``k8s.io/apimachinery/pkg/util/validation/validation.go``:
``IsQualifiedName``, ``IsValidLabelValue``, ``IsDNS1123Subdomain``): a key is an optional DNS
subdomain prefix (at most 253 characters) and ``/``, then a name of at most 63 characters of
letters, digits, ``-``, ``_``, ``.``, starting and ending with a letter or digit; a value is
empty or such a name. So a comma, a space or a ``=`` in a value is refused here, not by the
API server halfway through a fleet.
"""

from __future__ import annotations

import re

from ncclcheck.errors import BadInput

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check_key(key: str, what: str = "label key") -> str:
    """``key`` if it is a valid qualified name, else :class:`BadInput` saying why.

    >>> check_key("ncclcheck.io/busbw-ok")
    'ncclcheck.io/busbw-ok'
    >>> check_key("Bad_Prefix/x")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: label key 'Bad_Prefix/x': the prefix must be a lower-case DNS subdomain
    """
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        raise BadInput(f"{what} {key!r}: the prefix must be a lower-case DNS subdomain")
    if not _NAME.match(name):
        raise BadInput(f"{what} {key!r}: the name must be 1-63 letters, digits, '-', '_' or '.', "
                       "starting and ending with a letter or digit")
    return key


def check_value(key: str, value: str) -> str:
    """``value`` if it is a valid label value, else :class:`BadInput`.

    >>> check_value("k", "ok-1.2_x")
    'ok-1.2_x'
    >>> check_value("k", "a,b")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: label k='a,b': a value is empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit
    """
    if value and not _NAME.match(value):
        raise BadInput(f"label {key}={value[:70]!r}: a value is empty or at most 63 letters, "
                       "digits, '-', '_' or '.', starting and ending with a letter or digit")
    return value
