"""Keeping a dataset the suite made for LeRobot's own reader: ``tests/compat/lerobot_check.sh --also`` loads every
``$CERES_TEST_OUTPUT/lerobot/<name>/dataset`` against its ``expected.json``, computed here from the stored capture
sources and the released shards (not from the dataset)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from django.core.files.storage import storages
from django_scopes import scopes_disabled

from portal.core import storage

REPO = Path(__file__).resolve().parents[3]


def keep_for_lerobot(test_output: Path, name: str, dataset: Path, items, release_folder: Path, *,
                     camera: str = "32x24") -> Path:
    """Copy ``dataset`` and its shards (``release_folder``'s episode folders of ``items``, whose mp4s LeRobot's
    decoded frames are compared with) to the kept folder, and write what LeRobot must read back."""
    kept = test_output / "lerobot" / name
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(dataset, kept / "dataset")
    shards = []
    for item in items:
        shutil.copytree(release_folder / item.folder, kept / "shards" / item.folder)
        shards.append(kept / "shards" / item.folder)
    captures = []
    with scopes_disabled():
        for item in items:
            folder = kept / "captures" / item.folder
            for entry in item.episode.recording.source_files:
                storage.fetch(storages["captures"], entry["path"], folder / entry["name"])
            captures.append(folder)
    expected = subprocess.run([sys.executable, str(REPO / "tests/compat/expectations.py"), "--camera", camera,
                               *map(str, captures), "--shards", *map(str, shards)],
                              cwd=REPO, capture_output=True, text=True, check=True)
    (kept / "expected.json").write_text(expected.stdout)
    return kept
