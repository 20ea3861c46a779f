"""The exporter's one JSON writer: the metadata, receipts and manifests it writes.

Two-space indented UTF-8 (non-ASCII as itself) with a final newline, and never NaN or Infinity (not JSON;
readers differ on them). Key order is the caller's: the receipts' artefacts are sorted by path where the
spec says so. The canonical form of a task specification (capture-source.md section 5) is a different,
compact form of its own and is written where it is defined.
"""

from pathlib import Path
from typing import Any

# The writer itself is the client's (manifests are digested over its bytes): one implementation.
from ceres_pull.manifest import json_bytes


def write_json(path: Path, value: Any) -> None:
    Path(path).write_bytes(json_bytes(value))
