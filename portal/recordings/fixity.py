"""The objects of the ``shards`` storage that the recordings account for, for the fixity check: every exported
episode's shard (its receipt, with the SHA-256 recorded at export, and the receipt's artefacts, as recorded in
``Episode.shard_files``); an episode allocated but not yet exported claims its folder (an export is writing it,
or left it for the next attempt, which clears it first)."""

from __future__ import annotations

import functools

from exporter.receipt import RECEIPT
from portal.fixity import registry
from portal.recordings.models import Episode

registry.root("shards", "")


def _shard(episode_id: int) -> list[registry.Expected]:
    episode = Episode.objects.select_related("study").only(
        "episode_index", "shard_files", "receipt_sha256", "study__code").get(pk=episode_id)
    prefix = episode.prefix
    return [registry.Expected(prefix + RECEIPT, episode.receipt_sha256),
            *(registry.Expected(prefix + item["path"], item["sha256"], item["bytes"]) for item in episode.shard_files)]


@registry.source
def shard_units(studies):
    episodes = Episode.objects.all() if studies is None else Episode.objects.filter(study__in=studies)
    for pk, study_id, code, index, exported_at in episodes.order_by().values_list(
            "pk", "study_id", "study__code", "episode_index", "exported_at").iterator(chunk_size=5000):
        folder = f"episode-{index:06d}"
        if exported_at is None:
            yield registry.Unit("shards", f"{code}/{folder}/", study_id, folder, claimed=True)
        else:
            yield registry.Unit("shards", f"{code}/{folder}/", study_id, folder,
                                expected=functools.partial(_shard, pk))
