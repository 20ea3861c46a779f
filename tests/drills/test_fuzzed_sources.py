"""Drill: 1 000 capture sources mutated from valid ones — truncated, bit-flipped, lines reordered or repeated,
oversized, values of the wrong type, keys or files missing, as folders and as ZIPs — through the one ingest
service. No crash and no ``internal error``; each ends rejected (with a reason naming what is wrong), quarantined
or accepted; nothing is left half-stored (a rejected source stores nothing, a kept one is stored whole); the
registry gains nothing. A seeded generator: the same 1 000 sources on every run."""

from __future__ import annotations

import json
import os
import random
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import storage
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path
from portal.studies.models import Demonstrator

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
SOURCES = int(os.environ.get("CERES_DRILL_SOURCES", "1000"))
MAX_BYTES = 4 * 1024 * 1024
State = Recording.State


@pytest.fixture
def small_limits(settings, tmp_path):
    """Local folders of the test's own (the drill is about validation, not the storage), and limits small enough
    for an oversized source to be cheap."""
    settings.CERES_MAX_SOURCE_BYTES = MAX_BYTES
    settings.CERES_MAX_SOURCE_ENTRIES = 40
    settings.STORAGES = {**settings.STORAGES, **{
        name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
               "OPTIONS": {"location": str(tmp_path / "fuzz-storage" / name)}} for name in settings.STORAGE_NAMES}}


def _json_paths(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _json_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _json_paths(item, (*path, index))


def _set(document, path, value):
    for key in path[:-1]:
        document = document[key]
    if value is _DELETE:
        del document[path[-1]]
    else:
        document[path[-1]] = value


_DELETE = object()
_WRONG = [None, "text", -1, 1e308, 2**70, [], {}, True, "", "../../etc/passwd", "\u0000", [1, 2, 3]]


def mutate(base: Path, target: Path, rng: random.Random) -> str:
    """A copy of ``base`` at ``target`` with one random mutation (or two); returns what was done."""
    shutil.copytree(base, target)
    files = sorted(p for p in target.rglob("*") if p.is_file())
    done = []
    for _ in range(rng.choice((1, 1, 1, 2))):
        kind = rng.choice(("truncate", "flip", "reorder", "repeat", "garbage-line", "oversize", "wrong-type",
                           "drop-key", "drop-file", "many-files", "empty"))
        victim = rng.choice(files)
        if not victim.exists():
            continue
        data = victim.read_bytes()
        if kind == "truncate":
            victim.write_bytes(data[:rng.randrange(len(data) or 1)])
        elif kind == "flip":
            blob = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                if blob:
                    blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
            victim.write_bytes(bytes(blob))
        elif kind in ("reorder", "repeat", "garbage-line"):
            victim = target / "journal.ndjson"
            if not victim.exists():
                continue
            lines = victim.read_bytes().splitlines(keepends=True)
            if len(lines) > 3:
                at = rng.randrange(1, len(lines) - 1)
                if kind == "reorder":
                    window = lines[at:at + rng.randint(2, 20)]
                    rng.shuffle(window)
                    lines[at:at + len(window)] = window
                elif kind == "repeat":
                    lines.insert(at, lines[at])
                else:
                    lines.insert(at, rng.choice((b"{not json\n", b"[]\n", b'{"type": 7}\n', b"\xff\xfe\n", b"null\n")))
            victim.write_bytes(b"".join(lines))
        elif kind == "oversize":
            with victim.open("ab") as out:
                out.write(os.urandom(1024) * (MAX_BYTES // 1024 + 1))
        elif kind in ("wrong-type", "drop-key"):
            victim = target / "capture.json"
            if not victim.exists():
                continue
            try:
                document = json.loads(victim.read_text())
                path = rng.choice(list(_json_paths(document)))
            except (ValueError, IndexError):  # already broken by the first mutation
                continue
            _set(document, path, _DELETE if kind == "drop-key" else rng.choice(_WRONG))
            victim.write_text(json.dumps(document))
        elif kind == "drop-file":
            victim.unlink()
        elif kind == "many-files":
            for number in range(60):
                (target / f"extra-{number}.bin").write_bytes(b"x")
        elif kind == "empty":
            victim.write_bytes(b"")
        done.append(f"{kind} {victim.relative_to(target)}")
    return ", ".join(done) or "none"


def as_zip(folder: Path) -> Path:
    archive = folder.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as packed:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                packed.write(path, path.relative_to(folder).as_posix())
    shutil.rmtree(folder)
    return archive


def test_a_thousand_fuzzed_sources_are_each_refused_or_kept_whole(small_limits, reg, make_capture, tmp_path):
    rng = random.Random(1234)
    bases = [make_capture(reg.claims(), seconds=1.0, width=32, height=24, seed=seed, **options)
             for seed, options in ((4001, {}), (4002, {"camera": "none"}), (4003, {"retries": 1}))]
    with scope(study=reg.study):
        before = Demonstrator.objects.count()
    outcomes, unnamed = Counter(), []
    for number in range(SOURCES):
        source = tmp_path / "fuzzed" / f"source-{number:04d}"
        what = mutate(rng.choice(bases), source, rng)
        if rng.random() < 0.3:
            source = as_zip(source)
        with scope(study=reg.study):
            recording = ingest_path(reg.coordinator, reg.study, source)
        outcomes[recording.state] += 1
        where = f"source {number} ({what}): {recording.state}: {recording.reason}"
        assert recording.state in (State.REJECTED, State.QUARANTINED, State.QUEUED, State.DUPLICATE), where
        assert "internal error" not in recording.reason, where
        stored = storage.walk(storages["captures"], recording.prefix)
        if recording.state == State.REJECTED:
            assert len(recording.reason) > 12 and stored == [], where
            names = {"capture.json", "journal", "media", "task", "ZIP", "zip", "member", "file", "source", "entries",
                     "bytes", "line", "key", "field", "value", "camera", "audio", "schema", "version", "recorded",
                     "rate", "frame", "JSON"}
            if not any(name in recording.reason for name in names):
                unnamed.append(where)
        elif recording.state != State.DUPLICATE:
            assert stored and sorted(stored) == sorted(entry["path"] for entry in recording.source_files), where
        shutil.rmtree(source, ignore_errors=True) if source.is_dir() else source.unlink(missing_ok=True)
    with scope(study=reg.study):
        assert Demonstrator.objects.count() == before  # ingest registers nobody
    assert not unnamed, "\n".join(unnamed[:10])
    assert outcomes[State.REJECTED] > SOURCES // 3 and sum(outcomes.values()) == SOURCES
    print(f"{SOURCES} fuzzed sources: {dict(outcomes)}")
