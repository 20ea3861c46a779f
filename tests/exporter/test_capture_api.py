"""What the exporter tells its callers about a capture source, so that no caller parses ``capture.json`` or
counts rows itself: row count, task list, audio files, making the source silent, its content digest.

Expectations are computed from the generated journal and media with the standard library and PyAV, not
from the exporter's own intermediate values."""

import json
import shutil

import av
import pytest

from exporter.generate import generate_capture
from exporter.source import make_silent, read_capture, source_digest


def _journal_segments(root):
    records = [json.loads(line) for line in (root / "journal.ndjson").read_text().splitlines() if line.strip()]
    segments = {}
    for record in records:
        if record["type"] == "segment":
            segments[(record["cycle"], record["repetition"], record["take"])] = record
    return sorted(segments.values(), key=lambda s: s["start_slot"])


def test_rows_and_tasks_are_those_of_the_retained_segments(tmp_path):
    root = generate_capture(tmp_path / "c", seconds=4, rate_hz=15, retries=2, seed=3)
    capture = read_capture(root)
    kept = [s for s in _journal_segments(root) if s["outcome"] != "retry"]
    assert capture.row_count == sum(s["end_slot"] - s["start_slot"] for s in kept) > 0
    assert capture.tasks == list(dict.fromkeys(s["task"] for s in kept))
    assert capture.dropped_retries == len(_journal_segments(root)) - len(kept) == 2


def _audio_streams(path) -> int:
    with av.open(str(path)) as media:
        return len(media.streams.audio)


def _video_packets(path) -> list[bytes]:
    with av.open(str(path)) as media:
        return [bytes(p) for p in media.demux(media.streams.video[0]) if p.size]


@pytest.mark.parametrize("microphone", ["track", "file"])
def test_make_silent_strips_the_camera_track_or_deletes_the_microphone_file(tmp_path, microphone):
    root = generate_capture(tmp_path / "c", seconds=2, rate_hz=15, microphone=microphone, seed=5)
    capture = read_capture(root)
    camera = root / capture.camera.media
    packets = _video_packets(camera)
    manifest = json.loads((root / "capture.json").read_bytes())
    expected = [capture.camera.media] if microphone == "track" else [manifest["audio"]["media"]]
    assert capture.audio_files == expected and capture.audio_in_source

    silent = make_silent(root, capture)

    assert _audio_streams(camera) == 0
    assert _video_packets(camera) == packets  # copied, not re-encoded
    assert not (microphone == "file" and (root / expected[0]).exists())
    assert json.loads((root / "capture.json").read_bytes())["audio"]["media"] is None
    again = read_capture(root)
    assert (silent.audio_files, silent.audio_in_source) == (again.audio_files, again.audio_in_source) == ([], False)
    assert silent.row_count == capture.row_count


def test_a_silent_source_is_left_alone(tmp_path):
    root = generate_capture(tmp_path / "c", seconds=2, rate_hz=15, seed=6)
    before = {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    capture = read_capture(root)
    assert make_silent(root, capture) is capture
    assert {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_the_content_digest_ignores_how_the_source_was_packed(tmp_path):
    root = generate_capture(tmp_path / "c", seconds=2, rate_hz=15, seed=7)
    wrapped = tmp_path / "wrapped" / "inner"
    shutil.copytree(root, wrapped)
    assert source_digest(root) == source_digest(wrapped)
    (wrapped / "journal.ndjson").write_bytes((wrapped / "journal.ndjson").read_bytes() + b"\n")
    assert source_digest(root) != source_digest(wrapped)


def test_the_content_digest_covers_names_as_well_as_bytes(tmp_path):
    """The same bytes under another name are another source (the digest pairs each path with its file)."""
    root = generate_capture(tmp_path / "c", seconds=2, rate_hz=15, seed=7)
    renamed = tmp_path / "renamed"
    shutil.copytree(root, renamed)
    camera = next((renamed / "media").iterdir())
    camera.rename(camera.with_name("other-" + camera.name))
    assert source_digest(root) != source_digest(renamed)
