"""The dataset card (README.md), croissant.json and CITATION.cff at the root of a release and of a one-dataset
download: listed in the signed manifest, checked by verify-release, valid for mlcroissant (whose record set yields
every frame), YAML that parses and names the licence and counts; the licence comes from the study's data-use
agreement; the release page carries schema.org Dataset JSON-LD."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from pathlib import Path

import mlcroissant
import pytest
import yaml
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from exporter.cards import CARD_FILES
from exporter.cli import main as exporter_main
from exporter.release import DATASET_MANIFEST, MANIFEST
from portal.audit.models import AuditEvent
from portal.core.signing import public_key_pem
from portal.research.models import Dataset
from portal.research.services import access, catalogue, datasets, links
from portal.studies.exceptions import RegistryError
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.research.conftest import AGREEMENT
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db


def pull(user, links_made, client, folder: Path) -> Path:
    for link in links_made:
        status, body = fetch(client, link.url)
        assert status == 200, link.path
        (folder / link.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / link.path).write_bytes(body)
    return folder


def verified_folder(folder: Path, tmp_path: Path, manifest_name: str) -> dict:
    key = tmp_path / "key.pem"
    key.write_text(public_key_pem())
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 0
    manifest = json.loads((folder / manifest_name).read_bytes())
    assert sorted(entry["path"] for entry in manifest["card_files"]) == sorted(CARD_FILES)
    return manifest


def frames_of(folder: Path, caplog) -> int:
    """The frames mlcroissant reads through the frames record set, once it validated croissant.json with no
    error and no warning (issues, and what it logs)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        dataset = mlcroissant.Dataset(jsonld=folder / "croissant.json")
        issues = dataset.metadata.ctx.issues
        assert not issues.errors and not issues.warnings, issues.report()
        count = sum(1 for _ in dataset.records(record_set="frames"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
    return count


def front_matter(folder: Path) -> dict:
    text = (folder / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, text[:200]
    return yaml.safe_load(match.group(1))


def test_a_release_carries_a_card_croissant_and_citation_that_verify_and_load(
        reg, agreement, make_released, verified, make_user, client, tmp_path, caplog):
    licensed = publish_data_use_agreement(reg.coordinator, reg.study, text=AGREEMENT, licence="CC-BY-NC-4.0")
    researcher = make_user(f"{reg.study.code}-reader")
    asked = access.request_access(researcher, reg.study, purpose="train a policy", version=licensed.version,
                                  sha256=licensed.sha256)
    access.grant_access(reg.coordinator, asked, expires_at=timezone.now() + timedelta(days=30))
    release = make_released(verified(2))
    with scope(study=release.study):
        folder = pull(researcher, links.release_links(researcher, release, via="api"), client, tmp_path / "rel")
    manifest = verified_folder(folder, tmp_path, MANIFEST)
    infos = [json.loads((folder / f"episode-{i:06d}/meta/info.json").read_text()) for i in range(2)]
    frames = sum(info["total_frames"] for info in infos)
    assert frames > 0 and frames_of(folder, caplog) == frames

    card = front_matter(folder)
    assert card["license"] == "cc-by-nc-4.0" and card["task_categories"] == ["robotics"]
    assert {"LeRobot", "CERES"} <= set(card["tags"])
    assert card["configs"][0]["data_files"][0]["path"] == ["episode-*/data/*/*.parquet"]
    assert card["ceres"]["episodes"] == 2 and card["ceres"]["frames"] == frames
    assert card["ceres"]["codebase_version"] == "v3.0" and card["ceres"]["id"] == release.release_id
    assert card["ceres"]["release_section_sha256"] == manifest["manifest_sha256"] == release.manifest_sha256
    citation = yaml.safe_load((folder / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "CC-BY-NC-4.0"
    assert citation["version"] == release.release_id and citation["authors"]

    # A re-run of the release job uploads the same card bytes, kept with the manifest.
    kept = release.release.card_files
    assert {name: (folder / name).read_text() for name in CARD_FILES} == kept
    # The signed manifest covers the card like every file: a changed card fails the check.
    (folder / "README.md").write_text(kept["README.md"].replace("cc-by-nc-4.0", "cc0-1.0"))
    assert exporter_main(["verify-release", str(folder), "--public-key", str(tmp_path / "key.pem")]) == 1


def test_a_one_dataset_download_carries_a_card_croissant_and_citation(released, researcher, client, tmp_path,
                                                                     caplog):
    with scope(study=released.study):
        items = [item for item in catalogue.released_items().select_related("request")
                 if item.request_id == released.pk and item.episode_index in (0, 2)]
        dataset, _ = datasets.request_dataset(researcher, released.study, items)
        datasets.build_dataset(dataset.pk)
        dataset = Dataset.objects.select_related("study").get(pk=dataset.pk)
        assert dataset.state == Dataset.State.READY
        folder = pull(researcher, links.dataset_links(researcher, dataset, via="api"), client, tmp_path / "ds")
    manifest = verified_folder(folder, tmp_path, DATASET_MANIFEST)
    assert dataset.files_total == len(manifest["dataset"]["files"]) + len(CARD_FILES) + 2
    info = json.loads((folder / "meta/info.json").read_text())
    assert info["total_episodes"] == 2 and frames_of(folder, caplog) == info["total_frames"]
    card = front_matter(folder)
    assert card["license"] == "other" and card["license_link"].endswith(f"/datasets/{dataset.number}/")
    assert card["configs"][0]["data_files"][0]["path"] == ["data/*/*.parquet"]
    assert (card["ceres"]["episodes"], card["ceres"]["frames"]) == (2, info["total_frames"])
    assert card["ceres"]["dataset_section_sha256"] == manifest["manifest_sha256"]
    assert yaml.safe_load((folder / "CITATION.cff").read_text())["cff-version"] == "1.2.0"


def test_the_release_page_carries_schema_org_dataset_json_ld(released, researcher, client):
    client.force_login(researcher)
    page = client.get(reverse("research-release", args=[released.study.code, released.number])).content.decode()
    blocks = re.findall(r'<script type="application/ld\+json">(.*?)</script>', page, re.S)
    assert len(blocks) == 1
    data = json.loads(blocks[0])
    assert data["@type"] == "Dataset" and data["@context"] == "https://schema.org/"
    assert released.release_id in data["identifier"] and data["license"] and data["dateModified"]
    assert data["creator"]["name"].startswith(f"CERES study {released.study.code}")
    assert any(item["encodingFormat"] == "application/x-parquet" for item in data["distribution"])
    assert "observation.state" in {variable["name"] for variable in data["variableMeasured"]}
    assert "<" not in blocks[0] and ">" not in blocks[0]  # escaped like json_script: nothing closes the block


def test_the_agreement_names_a_licence_and_a_change_is_a_new_audited_version(reg, agreement, client, make_user):
    assert agreement.licence == "other"
    with pytest.raises(RegistryError, match="identical"):
        publish_data_use_agreement(reg.coordinator, reg.study, text=AGREEMENT)
    with pytest.raises(RegistryError, match="licence 'MIT'"):
        publish_data_use_agreement(reg.coordinator, reg.study, text=AGREEMENT, licence="MIT")
    client.force_login(reg.coordinator)
    settings_page = client.get(reverse("study-settings", args=[reg.study.code])).content.decode()
    assert "<code>other</code>" in settings_page and 'name="licence"' in settings_page
    response = client.post(reverse("study-publish-agreement", args=[reg.study.code]),
                           {"text": AGREEMENT, "licence": "CC-BY-4.0"})
    assert response.status_code == 302
    event = AuditEvent.objects.filter(action="study.data_use_agreement_published").order_by("-seq").first()
    assert event.before["licence"] == "other" and event.after == {
        "version": agreement.version + 1, "sha256": agreement.sha256, "licence": "CC-BY-4.0"}
    # A researcher asking for access sees the licence of the version they accept.
    client.force_login(make_user(f"{reg.study.code}-asker"))
    assert "<code>CC-BY-4.0</code>" in client.get(reverse("research-ask", args=[reg.study.code])).content.decode()
