"""The exporter's fast paths give the results of the plain ones: the one-pass check of a fully tracked
hand, the camera video written beside the data table, and the shared receipt code."""

import json
from pathlib import Path

import numpy as np
import pytest

import exporter.shard
from exporter.errors import SourceError
from exporter.features import JOINT_VALUES, JOINTS
from exporter.generate import generate_capture
from exporter.journal import _checked_frame_state, _fast_frame_state, parse_journal
from exporter.receipt import RECEIPT, build_artefacts, verify_artefacts
from exporter.shard import export_shard
from tests.exporter.conftest import frame, hand, segment


def parsed(tmp_path: Path, records: list) -> np.ndarray:
    """States of the journal's observed slots, in slot order."""
    path = tmp_path / "journal.ndjson"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    with path.open("rb") as stream:
        journal = parse_journal(stream, 30, path.open)
    return journal.states.take(journal.records)


def test_tracked_and_partly_tracked_hands_give_the_same_values(tmp_path: Path):
    untracked = (0, 4, 9, 24)
    records = [frame(0), frame(1, left=hand(1, 0, untracked_joints=untracked)), segment(0, 2, "Wipe")]
    states = parsed(tmp_path, records)
    left = slice(8 + 1, 8 + 1 + len(JOINTS) * JOINT_VALUES)
    for row, record in zip(states, records[:2], strict=True):
        expected = [
            value
            for joint in record["left"]["joints"]
            for value in (joint if joint is not None else [0.0] * JOINT_VALUES)
        ]
        np.testing.assert_array_equal(row[left], np.array(expected, dtype=np.float32))
    assert not states[1, left].reshape(len(JOINTS), JOINT_VALUES)[list(untracked)].any()


@pytest.mark.parametrize(
    ("joint", "value"),
    [(3, [0.1] * 7), (3, "abcdefgh"), (7, [0.1] * 7 + [True]), (7, [0.1] * 7 + [[0.1]]), (24, [0.1] * 7 + [None])],
)
def test_a_bad_joint_of_a_tracked_hand_is_named(tmp_path: Path, joint: int, value):
    bad = frame(1)
    bad["right"]["joints"][joint] = value
    with pytest.raises(SourceError, match=rf"journal.ndjson:2: right\.joints\[{joint}\]"):
        parsed(tmp_path, [frame(0), bad, segment(0, 2, "Wipe")])


@pytest.mark.parametrize(
    "value",
    [0, -0.0, 1, 2**54 + 2**30 + 1, -(2**60), 3.4028234e38, 1e-45, 0.1, 123456.789, 1e308],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_fast_and_checked_frame_states_agree(value):
    record = frame(3, head={"p": [value, 0.5, 1], "q": [0, 0, value, 1.0]})
    record["left"]["joints"][4][:3] = [value, 2, -value]
    record["right"]["joints"][9][7] = value
    fast = _fast_frame_state(record)

    def fail(message: str) -> SourceError:
        return SourceError(message)

    try:
        checked = _checked_frame_state(record, fail)
    except SourceError:
        assert fast is None  # out of the float32 range: the checked path names the error
        return
    assert fast is not None
    np.testing.assert_array_equal(fast[0], checked[0])
    assert fast[1] == checked[1]


def test_a_line_with_a_boolean_takes_the_checked_path(tmp_path: Path):
    flagged = frame(1, note={"calibrated": True})
    states = parsed(tmp_path, [frame(0), flagged, segment(0, 2, "Wipe")])
    np.testing.assert_array_equal(states[1], parsed(tmp_path, [frame(0), frame(1), segment(0, 2, "Wipe")])[1])


def test_a_video_failure_beside_the_data_table_fails_the_export_cleanly(tmp_path: Path, monkeypatch):
    source = generate_capture(tmp_path / "source", seconds=2, retries=0, seed=3)

    def broken(mp4: Path) -> dict:
        raise SourceError("video stream does not decode", path=str(mp4))

    monkeypatch.setattr(exporter.shard, "video_stats", broken)
    out = tmp_path / "out"
    with pytest.raises(SourceError, match="does not decode"):
        export_shard(source, out)
    assert list(out.iterdir()) == []


def test_receipt_artefacts_and_their_verification(tmp_path: Path):
    root = tmp_path / "folder"
    (root / "meta").mkdir(parents=True)
    (root / "meta/info.json").write_text("{}")
    (root / "data.parquet").write_bytes(b"PAR1" * 1000)
    receipt = {"artefacts": build_artefacts(root, exclude=RECEIPT)}
    assert [a["path"] for a in receipt["artefacts"]] == ["data.parquet", "meta/info.json"]
    assert receipt["artefacts"][0]["bytes"] == 4000
    (root / RECEIPT).parent.mkdir()
    (root / RECEIPT).write_text(json.dumps(receipt))
    assert verify_artefacts(root, RECEIPT) == []

    (root / "data.parquet").write_bytes(b"PAR1" * 999)
    (root / "meta/info.json").write_text("[]")
    problems = verify_artefacts(root, RECEIPT)
    assert problems[0] == "data.parquet: 3996 bytes, receipt says 4000"
    assert problems[1].startswith("data.parquet: SHA-256 ")
    assert problems[2].startswith("meta/info.json: SHA-256 ") and len(problems) == 3
