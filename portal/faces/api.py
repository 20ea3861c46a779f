"""REST API of an episode's faces, under ``/api/studies/<study_code>/faces/<episode_index>/``: what was detected and
reviewed (coordinators and ethics officers read it), the ethics officers' changes (add a box over a missed face for
keyframes, remove an added box or a detection, mark the faces reviewed) and a new detection run. Each calls the
service the viewer calls."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.faces.models import FaceSpan
from portal.faces.services import detection, review
from portal.recordings.models import Episode

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER


class KeyframesSerializer(serializers.Serializer):
    keyframes = serializers.JSONField(help_text="[[frame, x0, y0, x1, y1], ...] in pixels, frames ascending; the "
                                                "box is interpolated linearly between keyframes.")


class DetectionRefSerializer(serializers.Serializer):
    frame = serializers.IntegerField(min_value=0)
    index = serializers.IntegerField(min_value=0, help_text="The detection's number within its frame (from 0).")


class SpanRefSerializer(serializers.Serializer):
    span = serializers.IntegerField(min_value=1, help_text="The added box's id.")


class EpisodeFacesViewSet(StudyScopedAPIMixin, viewsets.GenericViewSet):
    lookup_field = "episode_index"
    lookup_value_regex = r"\d+"
    required_roles = {"retrieve": (COORDINATOR, ETHICS), "detect": (COORDINATOR, ETHICS), "*": (ETHICS,)}
    serializer_class = KeyframesSerializer

    def get_queryset(self):
        return Episode.objects.select_related("study")

    def _episode(self) -> Episode:
        return get_object_or_404(self.get_queryset(), episode_index=self.kwargs["episode_index"])

    def _answer(self, episode: Episode) -> Response:
        return Response(review.episode_faces(episode))

    @extend_schema(responses={200: dict})
    def retrieve(self, request, *args, **kwargs):
        return self._answer(self._episode())

    @extend_schema(request=KeyframesSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="add-box")
    def add_box(self, request, *args, **kwargs):
        episode = self._episode()
        data = KeyframesSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        review.add_span(request.user, episode, data.validated_data["keyframes"])
        return self._answer(episode)

    @extend_schema(request=SpanRefSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="remove-box")
    def remove_box(self, request, *args, **kwargs):
        episode = self._episode()
        data = SpanRefSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        span = get_object_or_404(FaceSpan.objects.select_related("episode__study"), episode=episode,
                                 pk=data.validated_data["span"])
        review.remove_span(request.user, span)
        return self._answer(episode)

    @extend_schema(request=DetectionRefSerializer, responses={200: dict})
    @action(detail=True, methods=["post"], url_path="remove-detection")
    def remove_detection(self, request, *args, **kwargs):
        episode = self._episode()
        data = DetectionRefSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        review.remove_detection(request.user, episode, **data.validated_data)
        return self._answer(episode)

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def reviewed(self, request, *args, **kwargs):
        episode = self._episode()
        review.mark_reviewed(request.user, episode)
        return self._answer(episode)

    @extend_schema(request=None, responses={200: dict})
    @action(detail=True, methods=["post"])
    def detect(self, request, *args, **kwargs):
        episode = self._episode()
        detection.queue_detection(request.user, episode, again=True)
        return self._answer(episode)
