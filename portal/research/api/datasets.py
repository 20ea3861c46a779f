"""One-dataset downloads (``services.datasets``): the caller's own, asking for one, and links to its files."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.core.integers import api_integer
from portal.research.api.links import LinksRequestSerializer, LinksSerializer, absolute
from portal.research.models import Dataset
from portal.research.services import catalogue, datasets, links

RESEARCHER = Role.RESEARCHER


class DatasetSerializer(serializers.ModelSerializer):
    dataset_id = serializers.CharField(read_only=True)

    class Meta:
        model = Dataset
        fields = ["number", "dataset_id", "state", "episode_count", "created_at", "phase", "done", "total",
                  "files_total", "bytes_total", "manifest_sha256", "key_fingerprint", "finished_at", "last_error"]
        read_only_fields = fields


class ChosenEpisodeSerializer(serializers.Serializer):
    release = api_integer(min_value=1, help_text="The release's number (release-NNNN).")
    episode_index = api_integer(min_value=0)


class NewDatasetSerializer(serializers.Serializer):
    episodes = ChosenEpisodeSerializer(many=True, allow_empty=False)


class DatasetViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     viewsets.GenericViewSet):
    """The caller's one-dataset downloads: ask for one (an identical selection is reused), follow its build,
    and get signed links to its files once ready."""

    queryset = Dataset.objects.none()
    serializer_class = DatasetSerializer
    lookup_field = "number"
    lookup_value_regex = "[0-9]+"
    keyset = ("-number",)
    required_roles = (RESEARCHER,)

    def get_queryset(self):
        return Dataset.objects.filter(requesters__user=self.request.user).select_related("study").defer(
            "manifest", "signature")

    @extend_schema(request=NewDatasetSerializer, responses={201: DatasetSerializer, 200: DatasetSerializer},
                   description="201 when a new dataset is queued, 200 when an identical selection is reused.")
    def create(self, request, *args, **kwargs):
        body = NewDatasetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        wanted = {(chosen["release"], chosen["episode_index"]) for chosen in body.validated_data["episodes"]}
        items = [item for item in catalogue.released_items().filter(
            request__number__in={n for n, _ in wanted}, episode_index__in={i for _, i in wanted}).select_related(
            "request") if (item.request.number, item.episode_index) in wanted]
        missing = sorted(wanted - {(item.request.number, item.episode_index) for item in items})
        if missing:
            raise ValidationError({"episodes": "not episodes of a published release of this study: "
                                               + ", ".join(f"release {n} episode {i}" for n, i in missing[:5])})
        dataset, reused = datasets.request_dataset(request.user, self.study, items)
        return Response(DatasetSerializer(dataset).data, status=status.HTTP_200_OK if reused else
                        status.HTTP_201_CREATED)

    @extend_schema(request=LinksRequestSerializer, responses=LinksSerializer)
    @action(detail=True, methods=["post"])
    def links(self, request, *args, **kwargs):
        dataset = self.get_object()
        body = LinksRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = links.dataset_links(request.user, dataset, body.validated_data["paths"], via="api")
        return Response({"links": [absolute(request, link) for link in issued]})
