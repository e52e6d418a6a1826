"""JSON Schema of the tune document (``ncclcheck/tune``, schema_version 1).

The schema lives with every other document's, in ``ncclcheck/schemas/tune.schema.json``; readers
validate against it through :mod:`ncclcheck.validate`, and ``ncclcheck schema tune`` prints it.
Unknown keys are allowed (readers ignore them, as :mod:`ncclcheck.schema` says); the keys it lists
are required with their types.

>>> SCHEMA["properties"]["schema"]
{'const': 'ncclcheck/tune'}
"""

from __future__ import annotations

from typing import Any

from ncclcheck import validate

SCHEMA: dict[str, Any] = validate.definition("tune")
