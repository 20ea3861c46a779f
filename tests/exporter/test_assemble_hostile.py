"""``assemble`` against a shard whose receipt agrees with it but whose metadata is hostile: every path template
and metadata field is checked before anything is written, and each problem is named (exit 2), never a
traceback, never a folder outside the output."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.assemble import assemble_dataset
from exporter.cli import main
from exporter.errors import AssemblyError
from exporter.generate import generate_capture
from exporter.receipt import RECEIPT
from exporter.shard import export_shard

VIDEO = "observation.images.passthrough"
VIDEO_FILE = f"videos/{VIDEO}/chunk-000/file-000.mp4"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-shard")
    capture = generate_capture(root / "capture", seconds=2, seed=5)
    return export_shard(capture, root / "shards").shard_dir


@pytest.fixture
def shard(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "in" / pristine.name
    shutil.copytree(pristine, copy)
    return copy


def _reseal(shard: Path, rename: dict[str, str] | None = None) -> None:
    """Make the shard's receipt agree with its files again (as anyone can: it is a list of digests), with
    artefacts renamed as ``rename`` says (a file the receipt names elsewhere)."""
    receipt = json.loads((shard / RECEIPT).read_bytes())
    for artefact in receipt["artefacts"]:
        data = (shard / artefact["path"]).read_bytes()
        artefact.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
        artefact["path"] = (rename or {}).get(artefact["path"], artefact["path"])
    (shard / RECEIPT).write_text(json.dumps(receipt))


def _change_info(shard: Path, change: Callable[[dict], None]) -> None:
    info = json.loads((shard / "meta/info.json").read_bytes())
    change(info)
    (shard / "meta/info.json").write_text(json.dumps(info))
    _reseal(shard)


def _everything_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def test_a_video_path_with_dot_dot_creates_nothing_outside_the_output(shard, tmp_path):
    """The template climbs out of the staging folder; the receipt lists the video at the climbed-to path (a
    large file, checked only when copied), so every other check passes."""
    template = "videos/../../../escaped/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    climbed = template.format(video_key=VIDEO, chunk_index=0, file_index=0)
    info = json.loads((shard / "meta/info.json").read_bytes())
    info["video_path"] = template
    (shard / "meta/info.json").write_text(json.dumps(info))
    _reseal(shard, rename={VIDEO_FILE: climbed})
    (shard / VIDEO_FILE).unlink()
    out = tmp_path / "work" / "out" / "dataset"
    out.parent.mkdir(parents=True)
    before = _everything_under(tmp_path)
    with pytest.raises(AssemblyError, match=r"a receipt artefact path 'videos/\.\./\.\./\.\./escaped/"):
        assemble_dataset(out, [shard])
    assert _everything_under(tmp_path) == before


@pytest.mark.parametrize(("change", "problem"), [
    (lambda info: info.update(chunks_size=0), "chunks_size must be a whole number of at least 1, not 0"),
    (lambda info: info.update(chunks_size=True), "chunks_size must be a whole number of at least 1, not True"),
    (lambda info: info.update(chunks_size="1000"), "chunks_size must be a whole number of at least 1, not '1000'"),
    (lambda info: info.pop("video_path"), "video_path must be a path template, not None"),
    (lambda info: info.pop("data_path"), "data_path must be a path template, not None"),
    (lambda info: info.update(video_path="videos/../{video_key}/c-{chunk_index}/f-{file_index}.mp4"),
     "video_path 'videos/../observation.images.passthrough/c-0/f-0.mp4' is not a relative path inside the folder"),
    (lambda info: info.update(video_path="/tmp/{video_key}/{chunk_index}/{file_index}.mp4"),
     "video_path '/tmp/observation.images.passthrough/0/0.mp4' is not a relative path inside the folder"),
    (lambda info: info.update(data_path="videos/{chunk_index}/{file_index}.parquet"),
     "data_path 'videos/{chunk_index}/{file_index}.parquet' must give a path under data/ ending in .parquet"),
    (lambda info: info.update(data_path="data/{chunk_index:>999999999}/{file_index}.parquet"),
     "data_path 'data/{chunk_index:>999999999}/{file_index}.parquet': {chunk_index} is not one of its fields"),
    (lambda info: info.update(data_path="data/{chunk_index.real}/{file_index}.parquet"),
     "{chunk_index.real} is not one of its fields"),
    (lambda info: info.update(data_path="data/{0}/{file_index}.parquet"), "{0} is not one of its fields"),
    (lambda info: info.update(data_path="data/{video_key}/{file_index}.parquet"), "{video_key} is not one of its"),
    (lambda info: info.update(data_path="data/{chunk_index!r}/{file_index}.parquet"), "{chunk_index} is not one"),
    (lambda info: info.update(data_path="data/{chunk_index/{file_index}.parquet"), "is not a path template"),
    (lambda info: info.update(fps=0), "fps must be a positive number, not 0"),
    (lambda info: info.update(features=[]), "features must be a non-empty object"),
    (lambda info: info["features"][VIDEO].pop("shape"), f"feature '{VIDEO}' needs a dtype and a shape"),
    (lambda info: info["features"].update({"../x": info["features"].pop(VIDEO)}),
     "video feature name '../x' cannot be a folder name"),
])
def test_hostile_info_is_named_before_anything_is_written(shard, tmp_path, capsys, change, problem):
    _change_info(shard, change)
    out = tmp_path / "out"
    before = _everything_under(tmp_path)
    assert main(["assemble", str(out), str(shard)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert problem in captured.err and "meta/info.json" in captured.err
    assert _everything_under(tmp_path) == before


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("episode_index", -1, "episode_index must be a whole number of at least 0, not -1"),
    ("episode_index", "0", "episode_index must be a whole number of at least 0, not '0'"),
    ("episode_id", None, "episode_id must be a non-empty string"),
])
def test_hostile_receipt_fields_are_named(shard, tmp_path, field, value, problem):
    receipt = json.loads((shard / RECEIPT).read_bytes())
    receipt[field] = value
    (shard / RECEIPT).write_text(json.dumps(receipt))
    with pytest.raises(AssemblyError, match=problem):
        assemble_dataset(tmp_path / "out", [shard])
    assert not (tmp_path / "out").exists()


# A shard's meta/stats.json is not read: the dataset's statistics are rebuilt, the cameras' from the episode
# rows (its receipt still covers the file, so a change that is not resealed is refused as any other).
@pytest.mark.parametrize("name", ["meta/info.json", "ceres/episode-metadata.json"])
def test_unreadable_json_is_named(shard, tmp_path, name):
    (shard / name).write_bytes(b"{not json")
    _reseal(shard)
    with pytest.raises(AssemblyError, match=rf"{name}: unreadable JSON"):
        assemble_dataset(tmp_path / "out", [shard])
    assert not (tmp_path / "out").exists()
