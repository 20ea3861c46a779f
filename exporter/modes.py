"""File modes of what the exporter publishes: episode shards, assembled datasets and stripped media.

Every published file is 0644 and every folder 0755, whatever the umask of the writing process and however
a file was staged (``tempfile`` makes 0600 files and 0700 folders), so a shard or dataset copied into a
shared folder is readable by its group like every other file there. The artefacts are immutable, so no
write bit beyond the owner's is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o644
FOLDER_MODE = 0o755


def publish_modes(root: Path) -> None:
    """Give ``root`` and every folder below it FOLDER_MODE, and every file below it FILE_MODE."""
    root = Path(root)
    root.chmod(FOLDER_MODE)
    for folder, folders, files in os.walk(root):
        for name in folders:
            path = Path(folder, name)
            if not path.is_symlink():
                path.chmod(FOLDER_MODE)
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink():
                path.chmod(FILE_MODE)
