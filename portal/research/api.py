"""REST API of researcher access: a researcher's access requests (``/api/access-requests/``); under
``/api/studies/<study_code>/``: the data-use agreement and its acceptance, the access requests a study's
coordinators and ethics officers decide, published releases and their episodes, download links, one-dataset
downloads, and the links issued. Every action calls the same service function as the pages; ``ceres-pull``
uses the release, dataset and link endpoints."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin, api_rows_for, token_allows
from portal.core.integers import api_integer
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.research.forms import BrowseFilter
from portal.research.models import AccessRequest, Dataset, IssuedLink
from portal.research.services import access, catalogue, datasets, links
from portal.studies.models import Study

COORDINATOR, ETHICS, RESEARCHER = Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER
STEWARDS = (COORDINATOR, ETHICS)


def _absolute(request, link: links.Link) -> dict:
    url = link.url if "://" in link.url else request.build_absolute_uri(link.url)
    return {"path": link.path, "url": url, "expires_at": link.expires_at}


class LinkSerializer(serializers.Serializer):
    path = serializers.CharField()
    url = serializers.URLField(help_text="A signed link to this one object, refused after expires_at.")
    expires_at = serializers.DateTimeField()


class LinksSerializer(serializers.Serializer):
    links = LinkSerializer(many=True)


class LinksRequestSerializer(serializers.Serializer):
    paths = serializers.ListField(child=serializers.CharField(max_length=500), required=False, default=list,
                                  help_text="Files (paths in the release or dataset folder); empty: every file, the "
                                            "manifest and its signature included.")


# --- the agreement and access requests --------------------------------------------------------------------


class AgreementSerializer(serializers.Serializer):
    study = serializers.CharField()
    version = serializers.IntegerField()
    sha256 = serializers.CharField()
    text = serializers.CharField()
    accepted_version = serializers.IntegerField(allow_null=True, help_text="The version you accepted last.")


class AcceptSerializer(serializers.Serializer):
    version = api_integer(min_value=1, help_text="The version you read.")
    sha256 = serializers.CharField(help_text="SHA-256 of the exact text you read (the agreement's sha256).")


class AccessRequestSerializer(serializers.ModelSerializer):
    study = serializers.CharField(source="study.code", read_only=True)
    researcher = serializers.CharField(source="researcher.username", read_only=True)
    agreement_version = serializers.IntegerField(source="acceptance.version", read_only=True)
    agreement_sha256 = serializers.CharField(source="acceptance.sha256", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, allow_null=True)

    class Meta:
        model = AccessRequest
        fields = ["uid", "study", "researcher", "purpose", "agreement_version", "agreement_sha256", "state",
                  "created_at", "decided_by", "decided_at", "expires_at", "reason", "revoked_at"]
        read_only_fields = fields


class NewAccessRequestSerializer(serializers.Serializer):
    study = serializers.CharField(help_text="The study's code.")
    purpose = serializers.CharField(max_length=access.PURPOSE_MAX_CHARS)
    agreement_version = api_integer(min_value=1)
    agreement_sha256 = serializers.CharField(help_text="SHA-256 of the agreement text you read and accept.")


class GrantSerializer(serializers.Serializer):
    expires_at = serializers.DateTimeField(help_text="When the access ends.")


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=access.REASON_MAX_CHARS)


class MyAccessRequestViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    """The caller's own access requests, in every study: list, ask (accepting the agreement), cancel."""

    serializer_class = AccessRequestSerializer
    permission_classes = [IsAuthenticated]
    lookup_field = "uid"
    keyset = ("-created_at", "-pk")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AccessRequest.objects.none()
        # A study-limited token sees (and so cancels) only the requests of its study.
        return api_rows_for(self.request, AccessRequest.objects.filter(researcher=self.request.user)).select_related(
            "study", "researcher", "acceptance", "decided_by")

    @extend_schema(request=NewAccessRequestSerializer, responses={201: AccessRequestSerializer})
    def create(self, request, *args, **kwargs):
        body = NewAccessRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        study = Study.objects.filter(code=body.validated_data["study"]).first()
        if study is None:
            raise ValidationError({"study": f"no study {body.validated_data['study']!r}"})
        if not token_allows(request, study):
            raise PermissionDenied(f"this API token is limited to another study than {study.code}")
        made = access.request_access(request.user, study, purpose=body.validated_data["purpose"],
                                     version=body.validated_data["agreement_version"],
                                     sha256=body.validated_data["agreement_sha256"])
        return Response(AccessRequestSerializer(made).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=AccessRequestSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, *args, **kwargs):
        access_request = self.get_object()
        access.cancel_request(request.user, access_request)
        return Response(AccessRequestSerializer(access_request).data)


class StudyAgreementViewSet(viewsets.ViewSet):
    """The study's current data-use agreement (any signed-in user may read it), and accepting it."""

    permission_classes = [IsAuthenticated]

    def _study(self) -> Study:
        study = get_object_or_404(Study, code=self.kwargs["study_code"])
        if not token_allows(self.request, study):
            raise PermissionDenied(f"this API token is limited to another study than {study.code}")
        return study

    @extend_schema(responses=AgreementSerializer)
    def list(self, request, study_code: str):
        study = self._study()
        agreement = access.open_to_requests(study)
        accepted = access.latest_acceptance(request.user, study)
        return Response(AgreementSerializer({
            "study": study.code, "version": agreement.version, "sha256": agreement.sha256, "text": agreement.text,
            "accepted_version": accepted.version if accepted else None}).data)

    @extend_schema(request=AcceptSerializer, responses=AgreementSerializer)
    @action(detail=False, methods=["post"])
    def accept(self, request, study_code: str):
        study = self._study()
        body = AcceptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        access.accept_agreement(request.user, study, version=body.validated_data["version"],
                                sha256=body.validated_data["sha256"])
        return self.list(request, study_code)


@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter("state", str, enum=AccessRequest.State.values)]))
class StudyAccessRequestViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                                viewsets.GenericViewSet):
    """A study's access requests, for its coordinators and ethics officers: grant (until a time), refuse or
    revoke (with a reason)."""

    queryset = AccessRequest.objects.none()
    serializer_class = AccessRequestSerializer
    lookup_field = "uid"
    keyset = ("-created_at", "-pk")
    required_roles = STEWARDS

    def get_queryset(self):
        rows = AccessRequest.objects.filter(study=self.study).select_related(
            "study", "researcher", "acceptance", "decided_by")
        state = self.request.query_params.get("state")
        if self.action == "list" and state:
            if state not in AccessRequest.State.values:
                raise ValidationError({"state": f"expected one of {', '.join(AccessRequest.State.values)}"})
            rows = rows.filter(state=state)
        return rows

    @extend_schema(request=GrantSerializer, responses=AccessRequestSerializer)
    @action(detail=True, methods=["post"])
    def grant(self, request, *args, **kwargs):
        access_request = self.get_object()
        body = GrantSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        access.grant_access(request.user, access_request, expires_at=body.validated_data["expires_at"])
        return Response(AccessRequestSerializer(access_request).data)

    @extend_schema(request=ReasonSerializer, responses=AccessRequestSerializer)
    @action(detail=True, methods=["post"])
    def refuse(self, request, *args, **kwargs):
        access_request = self.get_object()
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        access.refuse_access(request.user, access_request, reason=body.validated_data["reason"])
        return Response(AccessRequestSerializer(access_request).data)

    @extend_schema(request=ReasonSerializer, responses=AccessRequestSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, *args, **kwargs):
        access_request = self.get_object()
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        access.revoke_access(request.user, access_request, reason=body.validated_data["reason"])
        return Response(AccessRequestSerializer(access_request).data)


# --- published releases and their episodes ---------------------------------------------------------------


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
        return Response({"links": [_absolute(request, link) for link in issued]})


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
        return filters.apply(catalogue.released_items().select_related("request", "episode__recording__demonstrator"))


# --- one-dataset downloads ----------------------------------------------------------------------------------


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
        return Response({"links": [_absolute(request, link) for link in issued]})


# --- links issued --------------------------------------------------------------------------------------------


class IssuedLinkSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username")
    release = serializers.CharField(source="release.release_id", allow_null=True, default=None)
    dataset = serializers.CharField(source="dataset.dataset_id", allow_null=True, default=None)

    class Meta:
        model = IssuedLink
        fields = ["id", "user", "release", "dataset", "episode_index", "path", "issued_at", "expires_at", "via"]


class IssuedLinkViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Download links issued in the study: a researcher's own; every one for coordinators and ethics officers."""

    queryset = IssuedLink.objects.none()
    serializer_class = IssuedLinkSerializer
    keyset = ("-issued_at", "-pk")
    required_roles = (COORDINATOR, ETHICS, RESEARCHER)

    def get_queryset(self):
        rows = IssuedLink.objects.select_related("user", "release", "dataset").defer(
            "dataset__manifest", "dataset__signature")
        if not (set(self.study_roles) & set(STEWARDS)):
            rows = rows.filter(user=self.request.user)
        return rows

