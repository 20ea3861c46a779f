"""REST API of the recording pipeline, under ``/api/studies/<study_code>/recordings/`` and ``.../episodes/``.

Uploads (multipart, field ``source``) are streamed to storage and ingested by a task, exactly as the
upload page does; the other actions call the same service functions.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.recordings.models import Episode, Recording
from portal.recordings.services import export, ingest

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
READ_ROLES = (COORDINATOR, ETHICS)


class EpisodeListSerializer(serializers.ModelSerializer):
    """An episode in a list: everything but its shard files (the episode itself has them)."""

    recording = serializers.UUIDField(source="recording.uid", read_only=True)
    folder = serializers.CharField(read_only=True)
    to_index = serializers.IntegerField(read_only=True)

    class Meta:
        model = Episode
        fields = ["episode_index", "folder", "recording", "from_index", "to_index", "length", "exported_at",
                  "receipt_sha256", "receipt_status", "verified_at", "video_method", "raw_audio_retained"]


class EpisodeSerializer(EpisodeListSerializer):
    class Meta(EpisodeListSerializer.Meta):
        fields = [*EpisodeListSerializer.Meta.fields, "shard_files"]


EPISODE_LIST_COLUMNS = ("episode_index", "from_index", "length", "exported_at", "receipt_sha256", "receipt_status",
                        "verified_at", "video_method", "raw_audio_retained", "recording__uid")


class RecordingListSerializer(serializers.ModelSerializer):
    """A recording in a list: no claims or summary (the recording itself has them)."""

    headset = serializers.SlugRelatedField(slug_field="headset_id", read_only=True)
    demonstrator = serializers.SlugRelatedField(slug_field="designator", read_only=True)
    episode = serializers.IntegerField(source="episode.episode_index", read_only=True, default=None,
                                       help_text="The episode index once export has allocated one.")
    duplicate_of = serializers.UUIDField(source="duplicate_of.uid", read_only=True, default=None)

    class Meta:
        model = Recording
        fields = ["uid", "state", "reason", "progress", "progress_note", "via", "original_name", "content_sha256",
                  "duplicate_of", "capture_id", "recorded_at", "headset", "demonstrator", "audio", "created_at",
                  "updated_at", "episode"]


class RecordingSerializer(RecordingListSerializer):
    class Meta(RecordingListSerializer.Meta):
        fields = [*RecordingListSerializer.Meta.fields, "claims", "summary"]


RECORDING_LIST_COLUMNS = ("uid", "state", "reason", "progress", "progress_note", "via", "original_name",
                          "content_sha256", "capture_id", "recorded_at", "audio", "created_at", "updated_at",
                          "headset__headset_id", "demonstrator__designator", "episode__episode_index",
                          "duplicate_of__uid")


class UploadSerializer(serializers.Serializer):
    source = serializers.FileField(help_text="The capture source as a ZIP archive.")


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("state", str, enum=Recording.State.values),
    OpenApiParameter("headset", str, description="headset ID"),
    OpenApiParameter("demonstrator", str, description="designator"),
]))
class RecordingViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                       viewsets.GenericViewSet):
    serializer_class = RecordingSerializer
    lookup_field = "uid"
    required_roles = {"list": READ_ROLES, "retrieve": READ_ROLES, "*": (COORDINATOR,)}
    parser_classes = [MultiPartParser]
    keyset = ("-created_at", "-pk")

    def get_serializer_class(self):
        return RecordingListSerializer if self.action == "list" else RecordingSerializer

    def get_queryset(self):
        recordings = Recording.objects.select_related("headset", "demonstrator", "duplicate_of", "episode")
        if self.action == "list":
            recordings = recordings.only(*RECORDING_LIST_COLUMNS)
        params = self.request.query_params
        if params.get("state"):
            if params["state"] not in Recording.State.values:
                raise ValidationError({"state": f"expected one of {', '.join(Recording.State.values)}"})
            recordings = recordings.filter(state=params["state"])
        if params.get("headset"):
            recordings = recordings.filter(headset__headset_id=params["headset"])
        if params.get("demonstrator"):
            recordings = recordings.filter(demonstrator__designator=params["demonstrator"])
        return recordings

    @extend_schema(request={"multipart/form-data": UploadSerializer}, responses={201: RecordingSerializer})
    def create(self, request, *args, **kwargs):
        upload = UploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        source = upload.validated_data["source"]
        recording = ingest.receive_upload(request.user, self.study, source, name=source.name, via="api")
        return Response(RecordingSerializer(recording).data, status=status.HTTP_201_CREATED)

    def _act(self, service):
        recording = self.get_object()
        service(self.request.user, recording)
        return Response(RecordingSerializer(recording).data)

    @extend_schema(request=None, responses=RecordingSerializer)
    @action(detail=True, methods=["post"])
    def recheck(self, request, *args, **kwargs):
        return self._act(ingest.recheck)

    @extend_schema(request=None, responses=RecordingSerializer,
                   description="Register the demonstrator a quarantined recording names (a generated designator "
                               "when it names none) and tie it to the recording.")
    @action(detail=True, methods=["post"], url_path="register-demonstrator")
    def register_demonstrator(self, request, *args, **kwargs):
        return self._act(ingest.register_demonstrator)

    @extend_schema(request=None, responses=RecordingSerializer)
    @action(detail=True, methods=["post"], url_path="retry-export")
    def retry_export(self, request, *args, **kwargs):
        return self._act(export.retry_export)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("receipt_status", str, enum=Episode.Receipt.values),
]))
class EpisodeViewSet(StudyScopedAPIMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = EpisodeSerializer
    lookup_field = "episode_index"
    required_roles = READ_ROLES
    # Dataset order: a client that kept its last next link later reads only the episodes added since.
    keyset = ("episode_index",)

    def get_serializer_class(self):
        return EpisodeListSerializer if self.action == "list" else EpisodeSerializer

    def get_queryset(self):
        episodes = Episode.objects.select_related("recording")
        if self.action != "list":
            return episodes
        status = self.request.query_params.get("receipt_status")
        if status:
            if status not in Episode.Receipt.values:
                raise ValidationError({"receipt_status": f"expected one of {', '.join(Episode.Receipt.values)}"})
            episodes = episodes.filter(receipt_status=status)
        return episodes.only(*EPISODE_LIST_COLUMNS)
