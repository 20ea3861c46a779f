"""The dataset card, croissant.json and CITATION.cff made from shards' metadata: valid for mlcroissant (its
frames record set yields every frame), YAML that parses whatever the study's text holds, Markdown that stays
inert, one record set per group of episodes with the same columns, and clear errors for what cannot be described."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import mlcroissant
import pytest
import yaml

from exporter import cards
from exporter.generate import generate_capture
from exporter.receipt import file_digest, folder_files
from exporter.shard import export_shard


def facts(**changes) -> cards.Facts:
    values = {"kind": "release", "identifier": "release-0001", "study": "sc01", "study_title": "Test study",
              "licence": "CC-BY-4.0", "agreement_version": 3, "published": "2026-05-04T09:30:00Z",
              "digest_name": "release_section_sha256", "digest": "ab" * 32, "url": "https://portal.example/r/1/"}
    return cards.Facts(**{**values, **changes})


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A release folder of two episode shards of one chained study."""
    root = tmp_path_factory.mktemp("cards")
    tasks, from_index = None, 0
    for index, seed in enumerate((21, 22)):
        capture = generate_capture(root / f"capture-{index}", seconds=1, seed=seed, retries=index)
        result = export_shard(capture, root / "shards", episode_index=index, from_index=from_index, tasks=tasks)
        shutil.copytree(result.shard_dir, root / "release" / f"episode-{index:06d}")
        tasks, from_index = result.tasks, from_index + result.rows
    return root / "release"


def written(folder: Path, made: dict[str, bytes]) -> Path:
    for name, data in made.items():
        (folder / name).write_bytes(data)
    return folder


def listing(folder: Path) -> list[dict]:
    return [{"path": name, **dict(zip(("sha256", "bytes"), file_digest(folder / name), strict=True))}
            for name in folder_files(folder) if name not in cards.CARD_FILES]


def test_a_release_of_shards_gets_a_card_croissant_and_citation_that_load(release, caplog):
    parts = [cards.read_part(release, f"episode-{index:06d}/") for index in range(2)]
    made = cards.card_files(facts(), parts, listing(release))
    assert sorted(made) == sorted(cards.CARD_FILES)
    written(release, made)
    frames = sum(part.info["total_frames"] for part in parts)
    with caplog.at_level(logging.WARNING):
        dataset = mlcroissant.Dataset(jsonld=release / cards.CROISSANT)
        assert not dataset.metadata.ctx.issues.errors and not dataset.metadata.ctx.issues.warnings
        records = list(dataset.records(record_set="frames"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == frames
    described = json.loads(made[cards.CROISSANT])
    assert described["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    objects = {item["name"]: item for item in described["distribution"] if item["@type"] == "cr:FileObject"}
    assert {name.rsplit(".", 1)[1] for name in objects} == {"parquet", "mp4"}
    assert all(objects[name]["sha256"] == file_digest(release / name)[0] for name in objects)
    fields = {field["name"]: field for field in described["recordSet"][0]["field"]}
    state = parts[0].info["features"]["observation.state"]
    assert fields["observation.state"]["repeated"] is True and fields["observation.state"]["dataType"] == "cr:Float32"
    assert f"shape {state['shape']}" in fields["observation.state"]["description"]
    assert "repeated" not in fields["timestamp"] and "observation.images.passthrough" not in fields

    front = yaml.safe_load(re.match(r"---\n(.*?)\n---\n", made[cards.README].decode(), re.S).group(1))
    assert front["license"] == "cc-by-4.0" and front["ceres"]["frames"] == frames
    assert front["ceres"]["episodes"] == 2 and front["ceres"]["fps"] == parts[0].info["fps"]
    assert front["ceres"]["robot_type"] == "ceres_webxr_hands"
    body = made[cards.README].decode()
    assert all(f"- {task}" in body for task in parts[0].tasks + parts[1].tasks)
    citation = yaml.safe_load(made[cards.CITATION])
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "CC-BY-4.0"
    assert citation["date-released"] == "2026-05-04" and citation["type"] == "dataset"


def _part(prefix: str, features: dict, tasks: list[str]) -> cards.Part:
    info = {"codebase_version": "v3.0", "fps": 30, "robot_type": "ceres_webxr_hands", "total_episodes": 1,
            "total_frames": 10, "features": features}
    return cards.Part(prefix=prefix, info=info, tasks=tasks)


STATE = {"observation.state": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
         "timestamp": {"dtype": "float32", "shape": [1], "names": None}}


def test_text_from_people_cannot_break_the_yaml_or_the_markdown():
    hostile = 'Pour "water"\n---\nlicense: mit\n<img src=x onerror=alert(1)> [link](http://x) `code`'
    made = cards.card_files(facts(study_title=hostile, purpose=hostile, licence="other"),
                            [_part("episode-000000/", STATE, [hostile])], [])
    text = made[cards.README].decode()
    front = yaml.safe_load(re.match(r"---\n(.*?)\n---\n", text, re.S).group(1))
    assert front["license"] == "other" and front["license_link"] == "https://portal.example/r/1/"
    assert not re.search(r"(?<!\\)<img", text) and "[link](" not in text and "\\[link\\]\\(http" in text
    citation = yaml.safe_load(made[cards.CITATION])
    assert citation["authors"][0]["name"] == f"CERES study sc01: {hostile}" and "license" not in citation
    assert json.loads(made[cards.CROISSANT])["keywords"][-1] == hostile


def test_episodes_with_other_columns_get_a_record_set_of_their_own():
    other = {**STATE, "action": {"dtype": "float32", "shape": [2], "names": None}}
    parts = [_part("episode-000000/", STATE, ["a"]), _part("episode-000001/", other, ["b"]),
             _part("episode-000002/", STATE, ["a"])]
    described = cards.croissant(facts(), parts, [])
    sets = {item["@id"]: item["includes"] for item in described["distribution"] if item["@type"] == "cr:FileSet"}
    assert sets == {"parquet-files-1": ["episode-000000/data/*/*.parquet", "episode-000002/data/*/*.parquet"],
                    "parquet-files-2": ["episode-000001/data/*/*.parquet"]}
    assert [len(record_set["field"]) for record_set in described["recordSet"]] == [2, 3]
    front = cards.card_files(facts(), parts, [])[cards.README].decode()
    assert "episode-000001/data/*/*.parquet" in front and "episode-*/" not in front


def test_what_cannot_be_described_is_named():
    with pytest.raises(cards.CardProblem, match="licence 'MIT'"):
        cards.card_files(facts(licence="MIT"), [_part("", STATE, [])], [])
    with pytest.raises(cards.CardProblem, match="'complex64'"):
        cards.card_files(facts(), [_part("", {"z": {"dtype": "complex64", "shape": [1]}}, [])], [])
    with pytest.raises(cards.CardProblem, match="at least one episode"):
        cards.card_files(facts(), [], [])


def test_a_folder_without_metadata_is_named(tmp_path):
    with pytest.raises(cards.CardProblem, match=r"episode-000004/meta/info\.json"):
        cards.read_part(tmp_path, "episode-000004/")
