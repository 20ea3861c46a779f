"""The faces section of the review viewer (``releases/episode.html``): the episode's detections and the ethics
officers' changes, each a form posting here and calling ``portal.faces.services``; the page's script
(``releases/faces.js``) draws the boxes over the video from ``faces.json``."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core.errors import refusals
from portal.faces.exceptions import FacesError
from portal.faces.models import FaceSpan
from portal.faces.services import detection, review
from portal.releases.models import ReleaseItem

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER


def parse_keyframes(text: str) -> list[list]:
    """One keyframe a line, ``frame x0 y0 x1 y1`` (spaces or commas); ``FacesError`` naming the line that is not."""
    keyframes = []
    for number, line in enumerate(text.strip().splitlines(), start=1):
        parts = line.replace(",", " ").split()
        if not parts:
            continue
        if len(parts) != 5:
            raise FacesError(f"line {number}: expected 5 numbers (frame x0 y0 x1 y1), got {len(parts)}")
        try:
            frame = int(parts[0])
            coords = [float(part) for part in parts[1:]]
        except ValueError:
            raise FacesError(f"line {number}: {line.strip()!r} is not 'frame x0 y0 x1 y1' in numbers") from None
        keyframes.append([frame, *coords])
    if not keyframes:
        raise FacesError("give at least one keyframe: frame x0 y0 x1 y1")
    return keyframes


class AddBoxForm(forms.Form):
    keyframes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "120 40 30 90 100\n150 60 30 110 100"}),
        help_text="One keyframe a line: frame x0 y0 x1 y1 (pixels of the video frame). The box covers every frame "
                  "from the first keyframe to the last, interpolated between them.")


class RemoveDetectionForm(forms.Form):
    frame = forms.IntegerField(min_value=0)
    index = forms.IntegerField(min_value=0)


class RemoveBoxForm(forms.Form):
    span = forms.IntegerField(min_value=1)


def _item(number: int, episode_index: int) -> ReleaseItem:
    return get_object_or_404(ReleaseItem.objects.select_related("request", "episode__study"),
                             request__number=number, episode_index=episode_index)


def section(request: HttpRequest, study, item: ReleaseItem) -> dict:
    """The page context of the faces section."""
    episode = item.episode
    return {"faces": review.episode_faces(episode, detections=True), "add_box_form": AddBoxForm(),
            "faces_officer": ETHICS in request.study_roles, "faces_url_args": [study.code, item.request.number,
                                                                               item.episode_index]}


def _back(study, number: int, episode_index: int) -> HttpResponse:
    response = redirect("release-episode", study.code, number, episode_index)
    response["Location"] += "#faces"
    return response


@study_view(COORDINATOR, ETHICS)
def faces_data(request: HttpRequest, study, number: int, episode_index: int) -> JsonResponse:
    """The episode's faces (``review.episode_faces``) for the overlay."""
    item = _item(number, episode_index)
    with refusals(request) as outcome:
        return JsonResponse(review.episode_faces(item.episode))
    return JsonResponse({"detail": str(outcome.error)}, status=outcome.error.status)


@require_POST
@study_view(ETHICS)
def add_box(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    form = AddBoxForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the added box's keyframes: frame x0 y0 x1 y1, one a line.")
    else:
        with refusals(request) as outcome:
            span = review.add_span(request.user, item.episode, parse_keyframes(form.cleaned_data["keyframes"]))
        if not outcome.refused:
            messages.success(request, f"Box added over frames {span.first_frame} to {span.last_frame}.")
    return _back(study, number, episode_index)


@require_POST
@study_view(ETHICS)
def remove_box(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    form = RemoveBoxForm(request.POST)
    if form.is_valid():
        span = get_object_or_404(FaceSpan.objects.select_related("episode__study"), episode=item.episode,
                                 pk=form.cleaned_data["span"])
        with refusals(request) as outcome:
            review.remove_span(request.user, span)
        if not outcome.refused:
            messages.success(request, "Added box removed.")
    else:
        messages.error(request, "Which added box? The form named none.")
    return _back(study, number, episode_index)


@require_POST
@study_view(ETHICS)
def remove_detection(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    form = RemoveDetectionForm(request.POST)
    if form.is_valid():
        with refusals(request) as outcome:
            review.remove_detection(request.user, item.episode, frame=form.cleaned_data["frame"],
                                    index=form.cleaned_data["index"])
        if not outcome.refused:
            messages.success(request, f"Detection {form.cleaned_data['index']} of frame "
                                      f"{form.cleaned_data['frame']} removed.")
    else:
        messages.error(request, "Which detection? Give its frame and index.")
    return _back(study, number, episode_index)


@require_POST
@study_view(ETHICS)
def mark_reviewed(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    with refusals(request) as outcome:
        review.mark_reviewed(request.user, item.episode)
    if not outcome.refused:
        messages.success(request, f"Faces of {item.folder} marked reviewed.")
    return _back(study, number, episode_index)


@require_POST
@study_view(COORDINATOR, ETHICS)
def detect_again(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    with refusals(request) as outcome:
        job = detection.queue_detection(request.user, item.episode, again=True)
    if not outcome.refused:
        if job is None:
            messages.error(request, "The study's face policy is off: faces are not detected.")
        else:
            messages.success(request, f"Face detection by {job.detector_id} queued.")
    return _back(study, number, episode_index)
