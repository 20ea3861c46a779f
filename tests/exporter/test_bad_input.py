"""Bad input: exit 2, one message naming the file/line/key, nothing under OUT_DIR, no traceback."""

import json
import os
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.cli import main
from tests.exporter.conftest import frame, manifest, segment, standard_records, write_source


def journal_with(tmp: Path, change: Callable[[list], None]) -> Path:
    records = standard_records()
    change(records)
    return write_source(tmp / "source", records)


def line_of(records: list, record) -> int:
    return records.index(record) + 1


def replace_frame(slot: int, new) -> Callable[[list], None]:
    def change(records: list) -> None:
        records[records.index(frame(slot))] = new

    return change


def nan_head(tmp: Path) -> Path:
    bad = frame(16)
    bad["head"]["p"][0] = float("nan")
    return journal_with(tmp, replace_frame(16, json.dumps(bad)))


def infinite_joint(tmp: Path) -> Path:
    bad = frame(16)
    bad["left"]["joints"][0][1] = 12345.5
    return journal_with(tmp, replace_frame(16, json.dumps(bad).replace("12345.5", "1e400")))


def wrong_joint_count(tmp: Path) -> Path:
    bad = frame(16)
    bad["left"]["joints"] = bad["left"]["joints"][:24]
    return journal_with(tmp, replace_frame(16, bad))


def boolean_joint_value(tmp: Path) -> Path:
    bad = frame(16)
    bad["right"]["joints"][3][0] = True
    return journal_with(tmp, replace_frame(16, bad))


def overlapping_segments(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.append(segment(25, 35, "Wipe", take=3)))


def conflicting_replay(tmp: Path) -> Path:
    other = frame(16)
    other["head"]["p"][2] = 0.5
    return journal_with(tmp, lambda r: r.append(other))


def conflicting_segment_replay(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.append(segment(32, 40, "Open the drawer", "success", repetition=1)))


def invalid_middle_line(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.insert(10, '{"type":"frame","slot":'))


def record_without_type(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.insert(10, {"slot": 3, "t": 1.0}))


def time_going_backwards(tmp: Path) -> Path:
    bad = frame(17, t=frame(15)["t"])
    return journal_with(tmp, replace_frame(17, bad))


def bad_outcome(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.append(segment(41, 45, "Wipe", "aborted", take=4)))


def lone_surrogate_task(tmp: Path) -> Path:
    line = json.dumps(segment(41, 45, "Wipe XSURROGATE", take=4)).replace("XSURROGATE", "\\ud800")
    return journal_with(tmp, lambda r: r.append(line))


def mostly_unrecorded_segment(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.append(segment(41, 2**31 - 1, "Wipe", take=4)))


def slot_out_of_range(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.append(frame(2**63)))


def only_retries(tmp: Path) -> Path:
    records = [frame(s) for s in range(10)] + [segment(0, 5, "A", "retry"), segment(5, 10, "A", "retry", take=1)]
    return write_source(tmp / "source", records)


def empty_journal(tmp: Path) -> Path:
    return write_source(tmp / "source", [])


def unsupported_version(tmp: Path) -> Path:
    return write_source(tmp / "source", standard_records(), data=manifest(version=2))


def missing_capture_id(tmp: Path) -> Path:
    data = manifest()
    del data["capture_id"]
    return write_source(tmp / "source", standard_records(), data=data)


def null_recorder(tmp: Path) -> Path:
    return write_source(tmp / "source", standard_records(), data=manifest(recorder=None))


def bad_availability(tmp: Path) -> Path:
    data = manifest()
    data["capture_device"]["os"] = {"availability": "maybe"}
    return write_source(tmp / "source", standard_records(), data=data)


def known_without_value(tmp: Path) -> Path:
    data = manifest()
    data["capture_device"]["os"] = {"availability": "known"}
    return write_source(tmp / "source", standard_records(), data=data)


def missing_journal(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    (source / "journal.ndjson").unlink()
    return source


def zip_slip(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    archive = tmp / "source.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(source / "capture.json", "capture.json")
        zf.write(source / "journal.ndjson", "journal.ndjson")
        zf.writestr("../../evil.txt", "owned")
    return archive


def zip_symlink(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    archive = tmp / "source.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(source / "capture.json", "capture.json")
        zf.write(source / "journal.ndjson", "journal.ndjson")
        link = zipfile.ZipInfo("media/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
    return archive


def folder_symlink(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    (source / "media").mkdir()
    (source / "media" / "camera.mp4").symlink_to("/etc/passwd")
    return source


def folder_fifo(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    os.mkfifo(source / "notes.fifo")
    return source


def unreferenced_media(tmp: Path) -> Path:
    source = write_source(tmp / "source", standard_records())
    (source / "media").mkdir()
    (source / "media" / "mic.wav").write_bytes(b"RIFF")
    return source


def missing_audio_file(tmp: Path) -> Path:
    data = manifest(audio={"microphone_enabled": True, "media": "media/mic.m4a"})
    return write_source(tmp / "source", standard_records(), data=data)


def undecodable_camera(tmp: Path) -> Path:
    camera = {
        "selected": "passthrough",
        "media": "media/camera.mp4",
        "width": 160,
        "height": 120,
        "frame_rate": 30,
        "first_frame_source_time": 8123.25,
    }
    source = write_source(tmp / "source", standard_records(), data=manifest(camera=camera))
    (source / "media").mkdir()
    (source / "media" / "camera.mp4").write_bytes(os.urandom(4096))
    return source


def deeply_nested_middle_line(tmp: Path) -> Path:
    return journal_with(tmp, lambda r: r.insert(10, "[" * 100_000 + "]" * 100_000))


def deeply_nested_manifest(tmp: Path, depth: int = 100_000) -> Path:
    data = manifest()
    data["capture_device"] = {"notes": "@"}
    text = json.dumps(data).replace('"@"', "[" * depth + "]" * depth)
    source = write_source(tmp / "source", standard_records())
    (source / "capture.json").write_text(text)
    return source


CASES = {
    "unsupported version": (unsupported_version, ["capture.json", "unsupported capture source version 2"]),
    "NaN": (nan_head, ["journal.ndjson:18:", "NaN"]),
    "Infinity": (infinite_joint, ["journal.ndjson:18:", "finite"]),
    "wrong joint count": (wrong_joint_count, ["journal.ndjson:18:", "left.joints", "25"]),
    "boolean number": (boolean_joint_value, ["journal.ndjson:18:", "right.joints[3]"]),
    "overlapping segments": (overlapping_segments, ["journal.ndjson:43:", "overlaps", "line 31"]),
    "conflicting replays": (conflicting_replay, ["journal.ndjson:43:", "slot 16", "line 18"]),
    "conflicting segment replay": (conflicting_segment_replay, ["journal.ndjson:43:", "line 42"]),
    "invalid middle line": (invalid_middle_line, ["journal.ndjson:11:", "invalid JSON"]),
    "deeply nested line": (deeply_nested_middle_line, ["journal.ndjson:11:", "invalid JSON", "nested"]),
    "deeply nested manifest": (deeply_nested_manifest, ["capture.json", "invalid JSON", "nested more than 64"]),
    "nested past the limit": (lambda tmp: deeply_nested_manifest(tmp, 65), ["capture.json", "nested more than 64"]),
    "record without type": (record_without_type, ["journal.ndjson:11:", "type"]),
    "time going backwards": (time_going_backwards, ["journal.ndjson:19:", "'t' must increase", "line 18"]),
    "bad outcome": (bad_outcome, ["journal.ndjson:43:", "outcome"]),
    "lone surrogate": (lone_surrogate_task, ["journal.ndjson:43:", "'task'"]),
    "mostly unrecorded segment": (mostly_unrecorded_segment, ["journal.ndjson:43:", "damaged"]),
    "slot out of range": (slot_out_of_range, ["journal.ndjson:43:", "'slot'"]),
    "only retries": (only_retries, ["journal.ndjson", "no retained segments"]),
    "empty journal": (empty_journal, ["journal.ndjson", "no retained segments"]),
    "missing key": (missing_capture_id, ["capture.json", "'capture_id' is required"]),
    "null recorder": (null_recorder, ["capture.json", "'recorder' must be an object"]),
    "bad availability": (bad_availability, ["capture.json", "'capture_device.os'"]),
    "known without value": (known_without_value, ["capture.json", "'capture_device.os'"]),
    "missing journal": (missing_journal, ["journal.ndjson", "missing"]),
    "zip-slip": (zip_slip, ["../../evil.txt", "unsafe path"]),
    "zip symlink": (zip_symlink, ["media/link", "symbolic link"]),
    "symlink": (folder_symlink, ["media/camera.mp4", "symbolic link"]),
    "FIFO": (folder_fifo, ["notes.fifo", "FIFO"]),
    "unreferenced media": (unreferenced_media, ["media/mic.wav", "not referenced"]),
    "missing audio file": (missing_audio_file, ["'audio.media'", "media/mic.m4a"]),
    "undecodable camera": (undecodable_camera, ["camera.mp4"]),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_and_writes_nothing(case: str, tmp_path: Path, capsys):
    make, fragments = CASES[case]
    source = make(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["export", str(source), str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    for fragment in fragments:
        assert fragment in lines[0]
    assert list(out.iterdir()) == []


def test_bad_input_in_a_subprocess_has_no_traceback(tmp_path: Path):
    source = conflicting_replay(tmp_path)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "export", str(source), str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "slot 16" in done.stderr
    assert not out.exists()


def test_missing_out_dir_is_not_created_for_bad_input(tmp_path: Path):
    source = unsupported_version(tmp_path)
    assert main(["export", str(source), str(tmp_path / "new" / "out")]) == 2
    assert not (tmp_path / "new").exists()


def test_study_json_must_be_an_object(tmp_path: Path, capsys):
    source = write_source(tmp_path / "source", standard_records())
    study = tmp_path / "study.json"
    study.write_text("[1, 2]")
    assert main(["export", str(source), str(tmp_path / "out"), "--study-json", str(study)]) == 2
    assert "study block must be a JSON object" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_out_dir_that_is_a_file(tmp_path: Path, capsys):
    source = write_source(tmp_path / "source", standard_records())
    (tmp_path / "out").write_text("not a folder")
    assert main(["export", str(source), str(tmp_path / "out")]) == 2
    assert "cannot write the shard here" in capsys.readouterr().err


def test_invalid_capture_json(tmp_path: Path, capsys):
    source = write_source(tmp_path / "source", standard_records())
    (source / "capture.json").write_text('{"schema": "ceres-capture-source",')
    assert main(["export", str(source), str(tmp_path / "out")]) == 2
    assert "capture.json: invalid JSON" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--episode-index", "--from-index"])
def test_negative_indices_are_refused(tmp_path: Path, capsys, option: str):
    source = write_source(tmp_path / "source", standard_records())
    assert main(["export", str(source), str(tmp_path / "out"), option, "-1"]) == 2
    assert f"error: {option}: must be an integer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_task_table_with_duplicates_is_refused(tmp_path: Path):
    from exporter.errors import SourceError
    from exporter.shard import export_shard

    source = write_source(tmp_path / "source", standard_records())
    with pytest.raises(SourceError, match="distinct"):
        export_shard(source, tmp_path / "out", tasks=["Open the drawer", "Open the drawer"])
    assert not (tmp_path / "out").exists()
