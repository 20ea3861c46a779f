"""The objects of the ``releases`` storage under ``releases/`` that the releases account for, for the fixity check:
a published release's folder holds exactly the files its signed manifest lists (the manifest as kept in the
database, ``Release.manifest``), the manifest itself and its signature, byte for byte as kept. A release still
being copied, or failed and waiting for a retry, claims its folder. A release superseded after a withdrawal keeps
its manifest's objects but those of the withdrawn episodes, which the withdrawal declares absent (and its
tombstones, which it declares expected: ``portal/research/fixity.py``).

In the ``shards`` storage, a release under the redact face policy has its derived (redacted) shards under
``redacted/<release uid>/``: a published release's are the files its signed manifest lists in
``redacted_episodes``; one still being written, failed, or superseded after a withdrawal (which deleted the
withdrawn episodes' derived shards) claims its folder."""

from __future__ import annotations

import functools

from exporter.receipt import bytes_digest
from exporter.release import MANIFEST, SIGNATURE, manifest_files, read_manifest
from portal.fixity import registry
from portal.releases.models import Release, ReleaseRequest

registry.root("releases", "releases/")
State = ReleaseRequest.State
_WRITING = (State.APPROVED, State.RELEASING, State.FAILED)


def _release(release_id: int) -> list[registry.Expected]:
    release = Release.objects.only("prefix", "manifest", "signature").get(pk=release_id)
    data, signature = bytes(release.manifest), bytes(release.signature)
    return [registry.Expected(release.prefix + MANIFEST, *bytes_digest(data)),
            registry.Expected(release.prefix + SIGNATURE, *bytes_digest(signature)),
            *(registry.Expected(release.prefix + item["path"], item["sha256"], item["bytes"])
              for item in manifest_files(read_manifest(data)))]


def _redacted(release_id: int, prefix: str) -> list[registry.Expected]:
    data = bytes(Release.objects.only("manifest").get(pk=release_id).manifest)
    expected = []
    for entry in read_manifest(data).get("redacted_episodes") or []:
        for item in entry["files"]:  # paths relative to the release folder: episode-NNNNNN/...
            expected.append(registry.Expected(prefix + item["path"], item["sha256"], item["bytes"]))
    return expected


@registry.source
def redacted_units(studies):
    requests = ReleaseRequest.objects.filter(face_policy="redact",
                                             state__in=(State.RELEASED, State.SUPERSEDED, *_WRITING))
    if studies is not None:
        requests = requests.filter(study__in=studies)
    for study_id, number, uid, state, release_id in requests.order_by().values_list(
            "study_id", "number", "uid", "state", "release__pk").iterator(chunk_size=5000):
        prefix, label = f"redacted/{uid}/", f"release-{number:04d} (redacted shards)"
        if state == State.RELEASED:
            yield registry.Unit("shards", prefix, study_id, label,
                                expected=functools.partial(_redacted, release_id, prefix))
        else:
            yield registry.Unit("shards", prefix, study_id, label, claimed=True)


@registry.source
def release_units(studies):
    requests = ReleaseRequest.objects.filter(state__in=(State.RELEASED, State.SUPERSEDED, *_WRITING))
    if studies is not None:
        requests = requests.filter(study__in=studies)
    for study_id, code, number, state, release_id in requests.order_by().values_list(
            "study_id", "study__code", "number", "state", "release__pk").iterator(chunk_size=5000):
        label = f"release-{number:04d}"
        prefix = f"releases/{code}/{label}/"
        if state in (State.RELEASED, State.SUPERSEDED):
            yield registry.Unit("releases", prefix, study_id, label, expected=functools.partial(_release, release_id))
        else:
            yield registry.Unit("releases", prefix, study_id, label, claimed=True)
