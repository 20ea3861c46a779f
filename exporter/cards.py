"""The dataset card and metadata at the root of every release and one-dataset download: ``README.md`` (a
dataset card with the YAML front matter Hugging Face and LeRobot cards carry), ``croissant.json`` (MLCommons
Croissant 1.0: the files, and the frames as a record set read from the parquet files) and ``CITATION.cff``
(Citation File Format 1.2.0).

Pure functions from the LeRobot metadata of what the download holds (each part's ``meta/info.json`` and task
strings: a release's episode shards, or the one assembled dataset) and the facts the portal knows (study,
licence, identifier, dates, digests) to the files' bytes. The signed manifest lists these files like any
other, so the card cannot name the manifest file's own digest: it names the digest of the release section the
ethics officers approved (a release) or the dataset receipt's (a one-dataset download). The contents are
written down in the project's docs (``docs/releases.md``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.errors import SourceError
from exporter.jsonfile import json_bytes
from exporter.task_table import read_tasks

README = "README.md"
CROISSANT = "croissant.json"
CITATION = "CITATION.cff"
CARD_FILES = (README, CROISSANT, CITATION)
CROISSANT_CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
# SPDX identifiers a study's data-use agreement may name, with what a Hugging Face card calls each; ``other``:
# the agreement itself is the only licence (controlled access, no open licence).
LICENCES = {
    "other": "other",
    "CC-BY-4.0": "cc-by-4.0",
    "CC-BY-SA-4.0": "cc-by-sa-4.0",
    "CC-BY-NC-4.0": "cc-by-nc-4.0",
    "CC-BY-NC-SA-4.0": "cc-by-nc-sa-4.0",
    "CC-BY-NC-ND-4.0": "cc-by-nc-nd-4.0",
    "CC-BY-ND-4.0": "cc-by-nd-4.0",
    "CC0-1.0": "cc0-1.0",
    "ODbL-1.0": "odbl",
    "ODC-By-1.0": "odc-by",
    "PDDL-1.0": "pddl",
    "CDLA-Permissive-2.0": "cdla-permissive-2.0",
    "CDLA-Sharing-1.0": "cdla-sharing-1.0",
}
DEFAULT_LICENCE = "other"
# numpy dtype strings of LeRobot features to Croissant data types.
_DATA_TYPES = {
    "bool": "sc:Boolean", "float16": "cr:Float16", "float32": "cr:Float32", "float64": "cr:Float64",
    "int8": "cr:Int8", "int16": "cr:Int16", "int32": "cr:Int32", "int64": "cr:Int64", "uint8": "cr:UInt8",
    "uint16": "cr:UInt16", "uint32": "cr:UInt32", "uint64": "cr:UInt64", "string": "sc:Text",
    "language": "sc:Text",
}
_CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}


class CardProblem(ValueError):
    """The metadata given cannot describe a dataset (the message names what is wrong)."""


@dataclass(frozen=True)
class Part:
    """One LeRobot v3 dataset inside the download, at ``prefix`` (``episode-NNNNNN/`` in a release, ``""`` for
    an assembled dataset): its ``meta/info.json`` and its task strings."""

    prefix: str
    info: dict[str, Any]
    tasks: list[str]


@dataclass(frozen=True)
class Facts:
    """What the portal knows of the download. ``kind``: ``release`` or ``dataset``; ``identifier``: the release
    or dataset id; ``published``: RFC 3339; ``digest_name`` and ``digest``: the digest the card may name (not
    the manifest file's); ``url``: the page of the release or dataset, when there is one."""

    kind: str
    identifier: str
    study: str
    study_title: str
    licence: str
    agreement_version: int | None
    published: str
    digest_name: str
    digest: str
    url: str = ""
    purpose: str = ""


def read_part(folder: Path, prefix: str = "") -> Part:
    """The metadata of the LeRobot dataset at ``folder/prefix``: its ``meta/info.json`` and the task strings of
    its ``meta/tasks.parquet`` (in task-index order)."""
    root = Path(folder) / prefix
    try:
        info = json.loads((root / "meta/info.json").read_bytes())
    except (OSError, ValueError) as exc:
        raise CardProblem(f"{prefix}meta/info.json: not readable as JSON ({exc})") from None
    if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
        raise CardProblem(f"{prefix}meta/info.json: no features")
    path = root / "meta/tasks.parquet"
    try:
        tasks = read_tasks(path) if path.exists() else []
    except SourceError as exc:
        raise CardProblem(f"{prefix}meta/tasks.parquet: {exc}") from None
    return Part(prefix=prefix, info=info, tasks=tasks)


def card_files(facts: Facts, parts: list[Part], files: list[dict[str, Any]]) -> dict[str, bytes]:
    """``README.md``, ``croissant.json`` and ``CITATION.cff`` for the download made of ``parts``, whose ``files``
    (``path``, ``bytes``, ``sha256``, relative to its root) are described in the Croissant distribution."""
    if facts.kind not in ("release", "dataset"):
        raise CardProblem(f"kind {facts.kind!r} is neither release nor dataset")
    if facts.licence not in LICENCES:
        raise CardProblem(f"licence {facts.licence!r} is not one of {', '.join(LICENCES)}")
    if not parts:
        raise CardProblem("a dataset card needs at least one episode")
    summary = _summary(parts)
    return {
        README: _readme(facts, parts, summary),
        CROISSANT: json_bytes(croissant(facts, parts, files, summary)),
        CITATION: _citation(facts, summary),
    }


# --- what the parts hold ---------------------------------------------------------------------------


def _summary(parts: list[Part]) -> dict[str, Any]:
    fps = sorted({part.info.get("fps") for part in parts}, key=str)
    robots = sorted({str(part.info.get("robot_type")) for part in parts if part.info.get("robot_type")})
    versions = sorted({str(part.info.get("codebase_version")) for part in parts})
    tasks: list[str] = []
    for part in parts:
        tasks += [task for task in part.tasks if task not in tasks]
    return {
        "codebase_version": versions[0] if len(versions) == 1 else versions,
        "episodes": sum(int(part.info.get("total_episodes") or 0) for part in parts),
        "frames": sum(int(part.info.get("total_frames") or 0) for part in parts),
        "fps": fps[0] if len(fps) == 1 else fps,
        "robot_type": robots[0] if len(robots) == 1 else robots,
        "tasks": tasks,
        "features": parts[0].info["features"],
        "groups": _groups(parts),
    }


def _groups(parts: list[Part]) -> list[list[Part]]:
    """Parts whose frames have the same columns (the non-video features), in order of first appearance: one
    Croissant record set each."""
    groups: dict[bytes, list[Part]] = {}
    for part in parts:
        groups.setdefault(json_bytes(_columns(part.info)), []).append(part)
    return list(groups.values())


def _columns(info: dict[str, Any]) -> dict[str, Any]:
    return {name: {"dtype": spec.get("dtype"), "shape": spec.get("shape")}
            for name, spec in info["features"].items() if spec.get("dtype") not in ("video", "image")}


def _videos(info: dict[str, Any]) -> list[str]:
    return [name for name, spec in info["features"].items() if spec.get("dtype") == "video"]


def _data_globs(group: list[Part], whole: bool) -> list[str]:
    """The parquet files of ``group`` as globs: one for the whole download when it is one group (every episode
    folder of a release, or the dataset's ``data/``), else one per part."""
    if whole and all(re.fullmatch(r"episode-\d+/", part.prefix) for part in group):
        return ["episode-*/data/*/*.parquet"]
    return list(dict.fromkeys(f"{part.prefix}data/*/*.parquet" for part in group))


def _title(facts: Facts) -> str:
    return f"CERES {facts.study} {facts.identifier}"


def _licence_text(facts: Facts) -> str:
    agreement = f"data-use agreement v{facts.agreement_version}" if facts.agreement_version else \
        "data-use agreement"
    if facts.licence == "other":
        return f"the study's {agreement} (no open licence: use only as the agreement allows)"
    return f"{facts.licence}, under the study's {agreement}"


# --- README.md ----------------------------------------------------------------------------------------


def _yaml(value: Any) -> str:
    """A scalar as YAML: JSON strings and numbers are YAML flow scalars."""
    return json.dumps(value, ensure_ascii=True)


def _readme(facts: Facts, parts: list[Part], summary: dict[str, Any]) -> bytes:
    front = ["---", f"license: {LICENCES[facts.licence]}"]
    if facts.licence == "other":
        front += [f"license_name: {_yaml(f'ceres-{facts.study}-data-use-agreement')}"]
        if facts.url:
            front += [f"license_link: {_yaml(facts.url)}"]
    front += ["task_categories:", "- robotics", "tags:", "- LeRobot", "- CERES", "- hand-demonstrations",
              f"pretty_name: {_yaml(_title(facts))}", "configs:", "- config_name: default", "  data_files:"]
    front += ["  - split: train", "    path:"]
    front += [f"    - {_yaml(glob)}" for glob in _data_globs(parts, len(summary["groups"]) == 1)]
    front += ["ceres:", f"  kind: {facts.kind}", f"  id: {_yaml(facts.identifier)}", f"  study: {_yaml(facts.study)}",
              f"  codebase_version: {_yaml(summary['codebase_version'])}", f"  episodes: {summary['episodes']}",
              f"  frames: {summary['frames']}", f"  fps: {_yaml(summary['fps'])}",
              f"  robot_type: {_yaml(summary['robot_type'])}", f"  licence: {_yaml(facts.licence)}",
              f"  {facts.digest_name}: {_yaml(facts.digest)}", "---", ""]
    tasks = "\n".join(f"- {_md(task)}" for task in summary["tasks"]) or "- (no task recorded)"
    layout = ("Each `episode-NNNNNN/` folder is one episode as its own LeRobot v3 dataset (a CERES episode "
              "shard); load one with `LeRobotDataset(repo_id, root=\"episode-000000\")`, or build one dataset of "
              "several episodes in the portal (a one-dataset download)." if facts.kind == "release" else
              "The folder is one LeRobot v3 dataset; load it with `LeRobotDataset(repo_id, root=FOLDER)`.")
    features = "\n".join(
        f"| `{name}` | {spec.get('dtype')} | {list(spec.get('shape') or [])} | {_md(_names(spec.get('names')))} |"
        for name, spec in summary["features"].items())
    digest_note = ("the SHA-256 of the release section of the signed manifest, which the ethics officers "
                   "approved" if facts.kind == "release" else "the SHA-256 of `ceres/dataset-receipt.json`")
    body = f"""# {_md(_title(facts))}

Hand demonstrations recorded in the CERES study `{facts.study}` ({_md(facts.study_title)}), exported as a
[LeRobot](https://github.com/huggingface/lerobot) dataset (codebase version {summary['codebase_version']}).
{f'Purpose of the release: {_md(facts.purpose)}' if facts.purpose else ''}

## Dataset description

- **{facts.kind.capitalize()}:** `{facts.identifier}`{f' ({facts.url})' if facts.url else ''}
- **Study:** `{facts.study}`
- **Published:** {facts.published}
- **License:** {_md(_licence_text(facts))}
- **Codebase version:** {summary['codebase_version']}
- **Robot type:** {summary['robot_type'] or 'not recorded'}
- **Episodes:** {summary['episodes']}
- **Frames:** {summary['frames']}
- **Frames per second:** {summary['fps']}
- **{facts.digest_name}:** `{facts.digest}` ({digest_note})

{layout}

## Tasks

{tasks}

## Features

| feature | dtype | shape | names |
| --- | --- | --- | --- |
{features}

Video features are stored as MP4 files under `videos/`; the other features are columns of the parquet files
under `data/`. `croissant.json` describes the same files and columns in MLCommons Croissant.

## Integrity

`{'release-manifest.json' if facts.kind == 'release' else 'dataset-manifest.json'}` lists every file of this
folder, this card included, with its size and SHA-256, and is signed by the portal: `ceres-pull` checks every
file as it downloads, and `python -m exporter verify-release FOLDER --public-key KEY` checks a folder. The card
cannot hold the digest of the manifest that lists it; instead it names {digest_note}.

## Citation

See `CITATION.cff`. BibTeX:

```bibtex
{_bibtex(facts, summary)}
```
"""
    return ("\n".join(front) + body).encode("utf-8")


def _md(text: str) -> str:
    """Text from people (task strings, titles) made inert in Markdown: no HTML, links or emphasis."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|])", r"\\\1", " ".join(str(text).split()))


def _names(names: Any, shown: int = 6) -> str:
    """A feature's names, the first ``shown`` of a long list and how many there are."""
    if isinstance(names, list):
        more = f", … ({len(names)} names)" if len(names) > shown else ""
        return ", ".join(map(str, names[:shown])) + more
    if isinstance(names, dict):
        return "; ".join(f"{key}: {_names(value)}" for key, value in names.items())
    return ""


def _bibtex(facts: Facts, summary: dict[str, Any]) -> str:
    def braced(text: str) -> str:
        return re.sub(r"[{}\\]", "", str(text))

    key = re.sub(r"[^A-Za-z0-9-]", "-", f"ceres-{facts.study}-{facts.identifier}")
    return "\n".join([
        f"@misc{{{key},",
        f"  title = {{{{{braced(_title(facts))}}}}},",
        f"  author = {{{{CERES study {braced(facts.study)}}}}},",
        f"  year = {{{facts.published[:4]}}},",
        f"  note = {{{braced(facts.kind)} {braced(facts.identifier)}, {summary['episodes']} episodes, "
        f"{summary['frames']} frames; {braced(facts.digest_name)} {facts.digest}}},",
        *([f"  howpublished = {{\\url{{{braced(facts.url)}}}}}"] if facts.url else []),
        "}",
    ])


# --- CITATION.cff --------------------------------------------------------------------------------------


def _citation(facts: Facts, summary: dict[str, Any]) -> bytes:
    lines = [
        "cff-version: 1.2.0",
        "message: \"If you use this dataset, please cite it as below.\"",
        "type: dataset",
        f"title: {_yaml(_title(facts))}",
        "authors:",
        f"  - name: {_yaml(f'CERES study {facts.study}: {facts.study_title}')}",
        f"version: {_yaml(facts.identifier)}",
        f"date-released: {_yaml(facts.published[:10])}",
        f"abstract: {_yaml(_abstract(facts, summary))}",
        "keywords:",
        "  - LeRobot",
        "  - CERES",
        "  - robotics",
        "  - hand demonstrations",
        "identifiers:",
        "  - type: other",
        f"    value: {_yaml(f'{facts.digest_name}:{facts.digest}')}",
        f"    description: {_yaml('SHA-256 the card names (not the manifest file own digest)')}",
    ]
    if facts.licence != "other":
        lines.append(f"license: {_yaml(facts.licence)}")
    if facts.url:
        lines.append(f"url: {_yaml(facts.url)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _abstract(facts: Facts, summary: dict[str, Any]) -> str:
    return (f"{summary['episodes']} hand-demonstration episodes ({summary['frames']} frames at {summary['fps']} "
            f"fps) of CERES study {facts.study}, as LeRobot {summary['codebase_version']} data. Licence: "
            f"{_licence_text(facts)}.")


# --- croissant.json -------------------------------------------------------------------------------------


def croissant(facts: Facts, parts: list[Part], files: list[dict[str, Any]],
              summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Croissant 1.0 description: every parquet and MP4 file as a ``FileObject`` (size and SHA-256), a
    ``FileSet`` of the parquet files of each group of parts with the same columns, and a ``RecordSet`` of the
    frames read from them with one field per non-video feature (arrays ``repeated``, their shape in the field's
    description: Croissant 1.0 has no array shape)."""
    summary = summary or _summary(parts)
    distribution: list[dict[str, Any]] = []
    for item in sorted(files, key=lambda item: item["path"]):
        path = item["path"]
        kind = ("application/x-parquet" if re.fullmatch(r"(episode-\d+/)?data/.+\.parquet", path) else
                "video/mp4" if re.fullmatch(r"(episode-\d+/)?videos/.+\.mp4", path) else None)
        if kind is None:
            continue
        distribution.append({"@type": "cr:FileObject", "@id": path, "name": path, "contentUrl": path,
                             "encodingFormat": kind, "contentSize": f"{item['bytes']} B",
                             "sha256": item["sha256"]})
    record_sets = []
    groups = summary["groups"]
    for number, group in enumerate(groups, start=1):
        suffix = "" if len(groups) == 1 else f"-{number}"
        file_set = f"parquet-files{suffix}"
        distribution.append({"@type": "cr:FileSet", "@id": file_set, "name": file_set,
                             "description": "The frames' parquet files.", "encodingFormat": "application/x-parquet",
                             "includes": _data_globs(group, len(groups) == 1)})
        frames = f"frames{suffix}"
        fields = []
        for name, spec in group[0].info["features"].items():
            if spec.get("dtype") in ("video", "image"):
                continue
            fields.append(_field(frames, file_set, name, spec))
        videos = _videos(group[0].info)
        record_sets.append({
            "@type": "cr:RecordSet", "@id": frames, "name": frames,
            "description": (f"One record per frame ({sum(int(p.info.get('total_frames') or 0) for p in group)} "
                            f"frames at {group[0].info.get('fps')} fps). "
                            + (f"The camera streams {', '.join(videos)} are MP4 files under videos/, decoded "
                               f"at each frame's timestamp." if videos else "")).strip(),
            "field": fields})
    dataset: dict[str, Any] = {
        "@context": _CONTEXT,
        "@type": "sc:Dataset",
        "name": re.sub(r"[^A-Za-z0-9_-]", "-", _title(facts)),
        "description": _abstract(facts, summary),
        "conformsTo": CROISSANT_CONFORMS_TO,
        "citeAs": _bibtex(facts, summary),
        "creator": {"@type": "sc:Organization", "name": f"CERES study {facts.study}: {facts.study_title}"},
        "datePublished": facts.published,
        "version": "1.0.0",
        "license": _licence_url(facts),
        "keywords": ["LeRobot", "CERES", "robotics", "hand demonstrations", *summary["tasks"]],
        "url": facts.url or f"urn:ceres:{facts.study}:{facts.identifier}",
        "identifier": facts.identifier,
        "distribution": distribution,
        "recordSet": record_sets,
    }
    return dataset


def _licence_url(facts: Facts) -> str:
    if facts.licence == "other":
        return facts.url or f"urn:ceres:{facts.study}:data-use-agreement"
    return f"https://spdx.org/licenses/{facts.licence}.html"


def _field(record_set: str, file_set: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    dtype = str(spec.get("dtype"))
    if dtype not in _DATA_TYPES:
        raise CardProblem(f"feature {name!r}: dtype {dtype!r} has no Croissant data type")
    shape = [int(size) for size in spec.get("shape") or [1]]
    names = _names(spec.get("names"))
    described = f"{dtype}, shape {shape}" + (f", names: {names}" if names else "")
    result: dict[str, Any] = {
        "@type": "cr:Field", "@id": f"{record_set}/{name}", "name": name, "description": described,
        "dataType": _DATA_TYPES[dtype], "source": {"fileSet": {"@id": file_set}, "extract": {"column": name}},
    }
    if shape != [1]:
        result["repeated"] = True
    return result
