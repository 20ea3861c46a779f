"""The exporter's fast paths give the results of the plain ones: orjson against the standard library's
json, the one-pass check of a fully tracked hand, the camera video written beside the data table, the
shared receipt code and the remux's packet order taken from the probe."""

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exporter.journal
import exporter.shard
from exporter.errors import SourceError
from exporter.features import JOINT_VALUES, JOINTS
from exporter.generate import generate_capture
from exporter.journal import _checked_frame_state, _fast_frame_state, _loads, parse_journal
from exporter.receipt import RECEIPT, build_artefacts, verify_artefacts
from exporter.shard import export_shard
from exporter.video import decode_order_pts, probe_camera
from tests.exporter.conftest import frame, gap, hand, segment, standard_records, write_source

EXPORTED_AT = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)


def parsed(tmp_path: Path, records: list) -> np.ndarray:
    """States of the journal's observed slots, in slot order."""
    path = tmp_path / "journal.ndjson"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    with path.open("rb") as stream:
        journal = parse_journal(stream, 30, path.open)
    return journal.states.take(journal.records)


def stdlib_loads(raw: bytes):
    return json.loads(raw, parse_constant=exporter.journal._reject_constant)


def shard_files(shard: Path) -> dict[str, bytes]:
    return {str(p.relative_to(shard)): p.read_bytes() for p in sorted(shard.rglob("*")) if p.is_file()}


def export_with_decoder(tmp_path: Path, records: list, name: str, monkeypatch, *, orjson_on: bool) -> dict[str, bytes]:
    """The shard's files, with orjson decoding the lines it accepts or (off) with the standard library only."""
    decoded = []
    orjson_loads = orjson.loads

    def loads(raw: bytes):
        if not orjson_on:
            raise orjson.JSONDecodeError("switched off for the test", "", 0)
        decoded.append(raw)
        return orjson_loads(raw)

    with monkeypatch.context() as patch:
        patch.setattr(exporter.journal.orjson, "loads", loads)
        source = write_source(tmp_path / f"source-{name}", records)
        result = export_shard(source, tmp_path / f"out-{name}", exported_at=EXPORTED_AT)
    assert bool(decoded) == orjson_on
    return shard_files(result.shard_dir)


def test_orjson_and_the_standard_library_give_identical_shards(tmp_path: Path, monkeypatch):
    records = standard_records()
    # a replay with other key order and spacing: equal once parsed, whichever decoder parsed it
    records.insert(12, json.dumps(frame(9), indent=1).replace("\n", ""))
    records.insert(13, json.dumps(dict(reversed(list(gap(18).items())))))
    with_orjson = export_with_decoder(tmp_path, records, "orjson", monkeypatch, orjson_on=True)
    stdlib_only = export_with_decoder(tmp_path, records, "stdlib", monkeypatch, orjson_on=False)
    assert with_orjson == stdlib_only


BIG = 10**69 + 1  # 70 digits: orjson would read it as the float 1e69


@pytest.mark.parametrize(
    "annotations",
    [{"count": BIG}, {"offset": -(2**63) - 1}, {"max": 2**64}, {"tiny": 5e-324, "zero": -0.0, "step": 1e-05}],
)
def test_annotations_keep_the_standard_librarys_values(tmp_path: Path, annotations: dict):
    records = [frame(0), frame(1), segment(0, 2, "Wipe", annotations=annotations)]
    source = write_source(tmp_path / "source", records)
    result = export_shard(source, tmp_path / "out")
    exported = json.loads((result.shard_dir / "ceres/episode-metadata.json").read_text())["segments"][0]
    assert repr(exported["annotations"]) == repr(annotations)


def test_a_replay_differing_only_beyond_64_bits_conflicts(tmp_path: Path):
    records = [frame(0, extra=BIG), frame(1), frame(0, extra=BIG - 1), segment(0, 2, "Wipe")]
    source = write_source(tmp_path / "source", records)
    with pytest.raises(SourceError, match=r"journal\.ndjson:3: slot 0 conflicts with the record on line 1"):
        export_shard(source, tmp_path / "out")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"type":"frame","slot":1,"t":NaN}', "invalid JSON: NaN is not a finite number"),
        ('{"type":"frame","slot":1,"t":1e400}', "'t' must be a finite number"),
        ('{"type":"frame","slot":1,"t":1,"head":{"p":[Infinity,0,0],"q":[0,0,0,1]}}', "invalid JSON: Infinity is not"),
        ('{"type":"segment","cycle":0,"repetition":0,"take":0,"task":"\\ud800"}', "'task' must be a non-empty string"),
        ('{"type":"frame","slot":1,,}', "invalid JSON: Expecting property name enclosed in double quotes"),
    ],
)
def test_lines_orjson_refuses_get_the_standard_librarys_verdict(tmp_path: Path, line: str, message: str):
    source = write_source(tmp_path / "source", [frame(0), line, frame(2), segment(0, 3, "Wipe")])
    with pytest.raises(SourceError, match=re.escape(f"journal.ndjson:2: {message}")):
        export_shard(source, tmp_path / "out")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**80), max_value=10**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, ensure_ascii=st.booleans(), indent=st.sampled_from([None, 1]))
def test_loads_gives_the_standard_librarys_values(value, ensure_ascii: bool, indent):
    raw = json.dumps({"type": "frame", "value": value}, ensure_ascii=ensure_ascii, indent=indent).encode()
    # repr tells 1 from 1.0 and 0.0 from -0.0, which == does not
    assert repr(_loads(raw)) == repr(stdlib_loads(raw))


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


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_a_pinch_tip_beyond_the_float_range_is_named(tmp_path: Path):
    bad = frame(1)
    bad["left"]["joints"][4][0] = 10**400  # the thumb tip: too large even to measure the pinch
    with pytest.raises(SourceError, match=r"journal\.ndjson:2: numbers must be finite and within the float32"):
        parsed(tmp_path, [frame(0), bad, segment(0, 2, "Wipe")])


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


def test_the_probe_records_the_packets_decode_order(tmp_path: Path):
    source = generate_capture(tmp_path / "capture", seconds=2, seed=5)
    camera = source / "media/camera.mp4"
    order = probe_camera(camera).decode_order_pts
    assert order is not None and len(order) == 60
    np.testing.assert_array_equal(order, decode_order_pts(camera))
