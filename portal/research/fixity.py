"""The objects of the ``releases`` storage under ``datasets/`` that the one-dataset downloads account for, for the
fixity check: a ready dataset's folder holds exactly the files its signed manifest lists (``Dataset.manifest``),
the manifest and its signature; a dataset queued, building or failed (asked for again later) claims its folder; a
dataset removed after a withdrawal must be empty but for its tombstone. A withdrawal's tombstones are expected
beside their release or dataset, and the withdrawn episodes' folders inside a release must be empty."""

from __future__ import annotations

import functools

from exporter.layout import episode_folder
from exporter.receipt import bytes_digest
from exporter.release import DATASET_MANIFEST, DATASET_SIGNATURE, manifest_files, read_manifest
from portal.fixity import registry
from portal.research.models import Dataset, Tombstone

registry.root("releases", "datasets/")


def _dataset(dataset_id: int) -> list[registry.Expected]:
    dataset = Dataset.objects.select_related("study").only("number", "manifest", "signature", "study__code").get(
        pk=dataset_id)
    data, signature = bytes(dataset.manifest), bytes(dataset.signature)
    prefix = dataset.prefix
    return [registry.Expected(prefix + DATASET_MANIFEST, *bytes_digest(data)),
            registry.Expected(prefix + DATASET_SIGNATURE, *bytes_digest(signature)),
            *(registry.Expected(prefix + item["path"], item["sha256"], item["bytes"])
              for item in manifest_files(read_manifest(data)))]


@registry.source
def dataset_units(studies):
    datasets = Dataset.objects.all() if studies is None else Dataset.objects.filter(study__in=studies)
    for pk, study_id, code, number, state in datasets.order_by().values_list(
            "pk", "study_id", "study__code", "number", "state").iterator(chunk_size=5000):
        label = f"dataset-{number:04d}"
        prefix = f"datasets/{code}/{label}/"
        if state == Dataset.State.READY:
            yield registry.Unit("releases", prefix, study_id, label, expected=functools.partial(_dataset, pk))
        elif state == Dataset.State.WITHDRAWN:
            yield registry.Unit("releases", prefix, study_id, label, absent="removed after a consent withdrawal")
        else:
            yield registry.Unit("releases", prefix, study_id, label, claimed=True)


def _tombstone(tombstone_id: int) -> list[registry.Expected]:
    tombstone = Tombstone.objects.only("object_name", "content", "signature").get(pk=tombstone_id)
    return [registry.Expected(tombstone.object_name, *bytes_digest(bytes(tombstone.content))),
            registry.Expected(f"{tombstone.object_name}.sig", *bytes_digest(bytes(tombstone.signature)))]


@registry.source
def withdrawal_units(studies):
    tombstones = Tombstone.objects.all() if studies is None else Tombstone.objects.filter(study__in=studies)
    for tombstone in tombstones.select_related("study", "release", "dataset").order_by("pk").iterator(
            chunk_size=2000):
        owner = tombstone.release or tombstone.dataset
        label = owner.release_id if tombstone.release_id else owner.dataset_id
        yield registry.Unit("releases", f"{owner.prefix}tombstones/", tombstone.study_id, f"{label} tombstones",
                            expected=functools.partial(_tombstone, tombstone.pk))
        if tombstone.release_id:
            for index in tombstone.episode_indexes:
                yield registry.Unit("releases", f"{owner.prefix}{episode_folder(index)}/", tombstone.study_id,
                                    f"{label}/{episode_folder(index)}",
                                    absent=f"withdrawn from {label} (consent withdrawn)")
