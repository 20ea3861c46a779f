"""A recording's history in the study's audit log, from upload to release (``audit.histories``): the events of the
recording, of its episode, and of every release request holding that episode, less the request's events about its
other episodes (inspections and download links naming another episode's folder). One-dataset downloads and what
researchers did with the release afterwards are not part of it. Registered by releases, the app that reads both a
recording and the requests releasing it."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.db.models import Q

from portal.audit import histories
from portal.recordings.models import Episode, Recording
from portal.releases.models import ReleaseItem

RECORDING, EPISODE = "recordings.recording", "recordings.episode"
RELEASE_REQUEST = "releases.releaserequest"


def find_recording(value: str) -> Recording | None:
    """The study's recording of the uid ``value`` (None for an empty value); call it inside the study's scope."""
    value = value.strip()
    if not value:
        return None
    try:
        uid = uuid.UUID(value)
    except ValueError:
        raise ValidationError("Not a recording's uid.") from None
    recording = Recording.objects.filter(uid=uid).only("pk", "uid", "capture_id", "original_name").first()
    if recording is None:
        raise ValidationError("No recording of this study has this uid.")
    return recording


def recording_history(recording: Recording) -> Q:
    """The events of a recording from upload to release (the module's docstring says which)."""
    history = Q(target_type=RECORDING, target_id=str(recording.pk))
    episode = Episode.objects.filter(recording=recording).only("pk", "episode_index").first()
    if episode is None:
        return history
    history |= Q(target_type=EPISODE, target_id=str(episode.pk))
    requests = [str(pk) for pk in ReleaseItem.objects.filter(episode=episode).values_list("request_id", flat=True)]
    if requests:
        folder = episode.folder
        about_another = ((Q(action="release.episode_inspected") & ~Q(after__episode=folder))
                         | (Q(action="research.link_issued") & Q(after__path__startswith="episode-")
                            & ~Q(after__path__startswith=f"{folder}/")))
        history |= Q(target_type=RELEASE_REQUEST, target_id__in=requests) & ~about_another
    return history


def recording_of(target_type: str, pk: int) -> tuple[str, str] | None:
    """The uid and label of the recording whose history the recording or episode ``pk`` belongs to."""
    recordings = Recording.objects.filter(pk=pk) if target_type == RECORDING else \
        Recording.objects.filter(episode__pk=pk)
    recording = recordings.only("uid", "capture_id", "original_name").first()
    return (str(recording.uid), str(recording)) if recording else None


histories.register(histories.History(
    name="recording", find=find_recording, value=lambda recording: str(recording.uid), events=recording_history,
    targets=(RECORDING, EPISODE), owner=recording_of))
