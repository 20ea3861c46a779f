"""Published releases and their episodes, for the study's researchers (``services.catalogue``); a release's
``links`` issues signed links to its files (``services.links``)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.research.api.links import LinksRequestSerializer, LinksSerializer, absolute
from portal.research.forms import BrowseFilter
from portal.research.services import catalogue, links

RESEARCHER = Role.RESEARCHER


class ReleasedSerializer(serializers.ModelSerializer):
    release_id = serializers.CharField(read_only=True)
    released_at = serializers.DateTimeField(source="release.finished_at", read_only=True)
    manifest_sha256 = serializers.CharField(source="release.manifest_sha256", read_only=True)
    key_fingerprint = serializers.CharField(source="release.key_fingerprint", read_only=True)
    files = serializers.IntegerField(source="release.objects_total", read_only=True)

    class Meta:
        model = ReleaseRequest
        fields = ["number", "release_id", "purpose", "episode_count", "released_at", "manifest_sha256",
                  "key_fingerprint", "files"]
        read_only_fields = fields


class ReleasedDetailSerializer(ReleasedSerializer):
    paths = serializers.SerializerMethodField(help_text="Every file of the release, manifest and signature first.")

    class Meta(ReleasedSerializer.Meta):
        fields = [*ReleasedSerializer.Meta.fields, "paths"]

    def get_paths(self, release: ReleaseRequest) -> list[str]:
        return list(catalogue.release_files(release))


class ReleasedViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      viewsets.GenericViewSet):
    """The study's published releases, for its researchers; ``links`` issues signed links to their files."""

    queryset = ReleaseRequest.objects.none()
    lookup_field = "number"
    lookup_value_regex = "[0-9]+"
    keyset = ("-number",)
    required_roles = (RESEARCHER,)

    def get_serializer_class(self):
        return ReleasedDetailSerializer if self.action == "retrieve" else ReleasedSerializer

    def get_object(self):
        try:
            return super().get_object()
        except Http404:  # name the release asked for and those that exist, not "No ReleaseRequest matches ..."
            raise NotFound(catalogue.not_published(self.kwargs["study_code"], self.kwargs["number"])) from None

    def get_queryset(self):
        rows = catalogue.released_requests().select_related("study", "release")
        if self.action == "list":  # a list shows the manifest's digest, never its bytes
            rows = rows.defer("release__manifest", "release__signature")
        return rows

    @extend_schema(request=LinksRequestSerializer, responses=LinksSerializer,
                   description="Signed links (each lives CERES_DOWNLOAD_LINK_SECONDS at most) to files of the release, "
                               "issued after a live check of your grant, agreement and the data's consent; each is "
                               "recorded.")
    @action(detail=True, methods=["post"])
    def links(self, request, *args, **kwargs):
        release_request = self.get_object()
        body = LinksRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = links.release_links(request.user, release_request, body.validated_data["paths"], via="api")
        return Response({"links": [absolute(request, link) for link in issued]})


class ReleasedEpisodeSerializer(serializers.ModelSerializer):
    release = serializers.IntegerField(source="request.number")
    release_id = serializers.CharField(source="request.release_id")
    episode_id = serializers.CharField(source="episode.recording.capture_id")
    recorded_at = serializers.DateTimeField(source="episode.recording.recorded_at")
    designator = serializers.CharField(source="episode.recording.demonstrator.designator", allow_null=True,
                                       default=None)
    length = serializers.IntegerField(source="episode.length")

    class Meta:
        model = ReleaseItem
        fields = ["release", "release_id", "episode_index", "episode_id", "recorded_at", "designator", "length",
                  "receipt_sha256"]


# What ReleasedEpisodeSerializer reads (a release id is made from its number), and the keyset's columns.
RELEASED_EPISODE_COLUMNS = (
    "episode_index", "receipt_sha256", "request__number", "episode__length",
    "episode__recording__capture_id", "episode__recording__recorded_at",
    "episode__recording__demonstrator__designator",
)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("task", str), OpenApiParameter("outcome", str), OpenApiParameter("designator", str),
    OpenApiParameter("recorded_from", OpenApiTypes.DATE), OpenApiParameter("recorded_to", OpenApiTypes.DATE),
    OpenApiParameter("release", int),
]))
class ReleasedEpisodeViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Every episode of every published release of the study, filtered as on the browse page."""

    queryset = ReleaseItem.objects.none()
    serializer_class = ReleasedEpisodeSerializer
    keyset = ("-request_id", "-episode_index")
    required_roles = (RESEARCHER,)

    def get_queryset(self):
        filters = BrowseFilter(self.request.query_params)
        if not filters.is_valid():
            raise ValidationError(filters.errors)
        # only the columns the serializer reads (and the keyset's): the rows' JSON and other columns are not decoded
        return filters.apply(catalogue.released_items()).select_related(
            "request", "episode__recording__demonstrator"
        ).only(*RELEASED_EPISODE_COLUMNS)
