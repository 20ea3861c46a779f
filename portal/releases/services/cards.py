"""The dataset card and metadata files (``README.md``, ``croissant.json``, ``CITATION.cff``) of a release or a
one-dataset download, made by the exporter's ``cards`` from the LeRobot metadata of what it holds and what the
portal knows: the study, the licence its current data-use agreement names, the identifier, the page address and
the digest the card may name."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.urls import reverse

from exporter import cards
from exporter.timestamps import rfc3339
from portal.releases.models import ReleaseRequest
from portal.studies.models import Study
from portal.studies.services.study import current_data_use_agreement

# The files of a shard the card reads: its LeRobot metadata.
METADATA = ("meta/info.json", "meta/tasks.parquet")


def licence(study: Study) -> tuple[str, int | None]:
    """The licence the study's current data-use agreement names and its version (``other``, None without one)."""
    current = current_data_use_agreement(study)
    return (current.licence, current.version) if current else (cards.DEFAULT_LICENCE, None)


def page_url(name: str, study: Study, number: int) -> str:
    return settings.CERES_PORTAL_URL + reverse(name, kwargs={"study_code": study.code, "number": number})


def facts(study: Study, *, kind: str, identifier: str, number: int, published, digest: str,
          purpose: str = "") -> cards.Facts:
    code, version = licence(study)
    return cards.Facts(
        kind=kind, identifier=identifier, study=study.code, study_title=study.title, licence=code,
        agreement_version=version, published=rfc3339(published),
        digest_name=f"{kind}_section_sha256", digest=digest, purpose=purpose,
        url=page_url("research-release" if kind == "release" else "research-dataset", study, number))


def release_cards(release: ReleaseRequest, *, published, metadata: dict[str, bytes],
                  redacted: dict[int, list[dict]] | None = None) -> dict[str, bytes]:
    """The card files of a release from each shard's metadata (``metadata``: the bytes of each file of
    ``METADATA`` by its path in the release, ``episode-NNNNNN/meta/info.json``, read and checked against the
    frozen digests by the caller: the release job reads them from the shards storage beside its copies)
    (``redacted``: episode index → the files of the derived shard published instead, under the redact face
    policy)."""
    items = list(release.items.all())
    with tempfile.TemporaryDirectory(prefix="ceres-card-") as scratch:
        root = Path(scratch)
        files = []
        for item in items:
            for entry in (redacted or {}).get(item.episode_index, item.files):
                path = f"{item.folder}/{entry['path']}"
                files.append({**entry, "path": path})
                if entry["path"] in METADATA:
                    if path not in metadata:
                        raise cards.CardProblem(f"{path}: the shard's metadata was not read")
                    (root / path).parent.mkdir(parents=True, exist_ok=True)
                    (root / path).write_bytes(metadata[path])
        parts = [cards.read_part(root, f"{item.folder}/") for item in items]
        return cards.card_files(
            facts(release.study, kind="release", identifier=release.release_id, number=release.number,
                  published=published, digest=release.manifest_sha256, purpose=release.purpose),
            parts, files)


def release_jsonld(release: ReleaseRequest) -> dict:
    """schema.org ``Dataset`` JSON-LD of a published release for institutional catalogues: read from the card
    files kept with its manifest (its Croissant metadata gives the variables and files), the study and the
    licence its card names."""
    import json

    executed = release.release
    kept = executed.card_files or {}
    described = json.loads(kept[cards.CROISSANT]) if cards.CROISSANT in kept else {}
    url = page_url("research-release", release.study, release.number)
    variables = [{"@type": "PropertyValue", "name": field["name"], "description": field.get("description", "")}
                 for record_set in described.get("recordSet", []) for field in record_set.get("field", [])]
    files = [item for item in described.get("distribution", []) if item.get("@type") == "cr:FileObject"]
    creator = {"@type": "Organization", "name": f"CERES study {release.study_code}: {release.study.title}"}
    return {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "name": f"CERES {release.study_code} {release.release_id}",
        "description": described.get("description") or
        f"Hand-demonstration episodes of CERES study {release.study_code}, as LeRobot v3.0 data.",
        "identifier": [release.release_id, f"sha256:{executed.manifest_sha256}"],
        "url": url,
        "license": described.get("license") or url,
        "creator": creator,
        "publisher": creator,
        "datePublished": rfc3339(executed.finished_at or executed.signed_at),
        "dateModified": rfc3339(executed.finished_at or executed.signed_at),
        "keywords": described.get("keywords") or ["LeRobot", "CERES", "robotics"],
        "isAccessibleForFree": False,
        "conditionsOfAccess": "Access is granted under the study's data-use agreement.",
        "distribution": [{"@type": "DataDownload", "name": name, "encodingFormat": media, "contentUrl": url}
                         for name, media in ((cards.CROISSANT, "application/ld+json"), (cards.README, "text/markdown"),
                                             (cards.CITATION, "application/x-yaml")) if name in kept]
        + [{"@type": "DataDownload", "name": item["name"], "encodingFormat": item["encodingFormat"],
            "contentSize": item.get("contentSize"), "sha256": item.get("sha256"), "contentUrl": url}
           for item in files],
        "variableMeasured": variables,
    }
