"""The objects the recordings account for, for the fixity check.

- ``shards``: every exported episode's shard (its receipt, with the SHA-256 recorded at export, and the receipt's
  artefacts, as recorded in ``Episode.shard_files``); an episode allocated but not yet exported claims its folder
  (an export is writing it, or left it for the next attempt, which clears it first).
- ``captures``: every ingested recording's silent source (``Recording.source_files``: path, SHA-256, length);
  a recording still being received claims its folder (the upload waits there, ingest is storing it); a rejected
  or duplicate recording keeps nothing. Raw audio kept encrypted claims its ``audio/`` folder (the ciphertext's
  digest is not recorded; decryption authenticates it); purged or stripped audio leaves nothing there. The
  bucket's ``inbox/`` (S3) belongs to the inbox's poll.
"""

from __future__ import annotations

import functools

from exporter.receipt import RECEIPT
from portal.fixity import registry
from portal.recordings.models import Episode, Recording

registry.root("shards", "")
registry.root("captures", "")
registry.other_part("captures", "inbox/")


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


def _source(recording_id: int) -> list[registry.Expected]:
    files = Recording.objects.only("source_files").get(pk=recording_id).source_files
    return [registry.Expected(item["path"], item["sha256"], item["bytes"]) for item in files]


@registry.source
def capture_units(studies):
    recordings = Recording.objects.all() if studies is None else Recording.objects.filter(study__in=studies)
    gone = {Recording.State.REJECTED: "the recording was rejected: nothing of its source is kept",
            Recording.State.DUPLICATE: "the recording is a duplicate: its source is kept once, with the original"}
    for pk, study_id, code, uid, state, audio in recordings.order_by().values_list(
            "pk", "study_id", "study__code", "uid", "state", "audio").iterator(chunk_size=5000):
        prefix, label = f"{code}/{uid}/", f"recording {uid}"
        if state == Recording.State.RECEIVED:
            yield registry.Unit("captures", prefix, study_id, label, claimed=True)
        elif state in gone:
            yield registry.Unit("captures", prefix, study_id, label, absent=gone[state])
        else:
            yield registry.Unit("captures", prefix, study_id, label, expected=functools.partial(_source, pk))
            if audio == Recording.Audio.ENCRYPTED:
                yield registry.Unit("captures", f"{prefix}audio/", study_id, f"{label} (raw audio, encrypted)",
                                    claimed=True)
