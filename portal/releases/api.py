"""REST API of releases, under ``/api/studies/<study_code>/release-requests/``: list (by state), read (with the
gate checklist, approvals and the release's progress), ask for a release, submit, approve, reject, re-verify,
retry, and the review data of an episode. Every action calls the same service function as the pages."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.accounts.network import client_ip
from portal.accounts.services import second_factor_passed_at
from portal.core.integers import api_integer
from portal.releases.models import Approval, Release, ReleaseItem, ReleaseRequest
from portal.releases.services import approval, gate, publish, release_requests, review

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
BOTH = (COORDINATOR, ETHICS)
State = ReleaseRequest.State


class ApprovalSerializer(serializers.ModelSerializer):
    officer = serializers.CharField(source="officer.username")

    class Meta:
        model = Approval
        fields = ["officer", "approved_at", "manifest_sha256"]


class ReleaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = Release
        fields = ["prefix", "objects_total", "objects_copied", "objects_found", "progress_note", "attempts",
                  "last_error", "manifest_sha256", "key_fingerprint", "signed_at", "finished_at"]


class CheckSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    status = serializers.ChoiceField(choices=[gate.PASS, gate.FAIL, gate.PENDING])
    detail = serializers.CharField()


class EpisodeGateSerializer(serializers.Serializer):
    episode = serializers.CharField(source="item.folder")
    episode_index = serializers.IntegerField(source="item.episode_index")
    receipt_sha256 = serializers.CharField(source="item.receipt_sha256")
    passed = serializers.BooleanField()
    checks = CheckSerializer(many=True)


class ReleaseRequestListSerializer(serializers.ModelSerializer):
    release_id = serializers.CharField(read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)

    class Meta:
        model = ReleaseRequest
        fields = ["number", "release_id", "state", "purpose", "requested_by", "created_at", "submitted_at",
                  "decided_at", "episode_count", "manifest_sha256", "reason"]


class ReleaseRequestSerializer(ReleaseRequestListSerializer):
    approvals = ApprovalSerializer(many=True, read_only=True)
    approvals_required = serializers.IntegerField(
        source="approvals_needed", read_only=True,
        help_text="Distinct ethics officers' approvals the request needs: frozen when it was submitted.")
    gate = serializers.SerializerMethodField()
    release = serializers.SerializerMethodField()

    class Meta(ReleaseRequestListSerializer.Meta):
        fields = [*ReleaseRequestListSerializer.Meta.fields, "approvals_required", "approvals", "gate", "release"]

    @extend_schema_field(EpisodeGateSerializer(many=True))
    def get_gate(self, release: ReleaseRequest) -> list[dict]:
        return EpisodeGateSerializer(gate.evaluate(release).episodes, many=True).data

    @extend_schema_field(ReleaseSerializer(allow_null=True))
    def get_release(self, release: ReleaseRequest) -> dict | None:
        executed = getattr(release, "release", None)
        return ReleaseSerializer(executed).data if executed is not None else None


class NewRequestSerializer(serializers.Serializer):
    episodes = serializers.ListField(child=api_integer(min_value=0), allow_empty=False,
                                     help_text="Episode indexes of verified episodes.")
    purpose = serializers.CharField(max_length=release_requests.PURPOSE_MAX_CHARS)


class ApproveSerializer(serializers.Serializer):
    manifest_sha256 = serializers.CharField(help_text="The manifest digest you reviewed (the request's "
                                                      "manifest_sha256).")
    otp_code = serializers.CharField(required=False, allow_blank=True, default="",
                                     help_text="A code from your authenticator, when the study asks for a fresh "
                                               "second factor.")


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("state", str, enum=State.values),
    OpenApiParameter("mine", OpenApiTypes.BOOL, description="Only requests the caller made."),
]))
class ReleaseRequestViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                            viewsets.GenericViewSet):
    queryset = ReleaseRequest.objects.none()  # the model, for the schema; get_queryset reads in scope
    lookup_field = "number"
    lookup_value_regex = "[0-9]+"
    keyset = ("-number",)
    required_roles = {"list": BOTH, "retrieve": BOTH, "create": (COORDINATOR,), "submit": (COORDINATOR,),
                      "approve": (ETHICS,), "reject": BOTH, "reverify": BOTH, "retry": BOTH, "review": BOTH}

    def get_serializer_class(self):
        return ReleaseRequestListSerializer if self.action == "list" else ReleaseRequestSerializer

    def get_queryset(self):
        requests_ = ReleaseRequest.objects.select_related("requested_by", "study")
        params = self.request.query_params
        if self.action == "list":
            requests_ = requests_.only(
                "number", "state", "purpose", "created_at", "submitted_at", "decided_at", "episode_count",
                "manifest_sha256", "reason", "requested_by__username", "study__code", "study_id")
            if params.get("state"):
                if params["state"] not in State.values:
                    raise ValidationError({"state": f"expected one of {', '.join(State.values)}"})
                requests_ = requests_.filter(state=params["state"])
            if params.get("mine", "").lower() in ("1", "true", "yes"):
                requests_ = requests_.filter(requested_by=self.request.user)
        return requests_

    def _answer(self, release: ReleaseRequest, code: int = status.HTTP_200_OK) -> Response:
        release.refresh_from_db()
        return Response(ReleaseRequestSerializer(release).data, status=code)

    @extend_schema(request=NewRequestSerializer, responses={201: ReleaseRequestSerializer})
    def create(self, request, *args, **kwargs):
        body = NewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        indexes = set(body.validated_data["episodes"])
        episodes = list(release_requests.releasable_episodes().filter(episode_index__in=indexes))
        missing = sorted(indexes - {episode.episode_index for episode in episodes})
        if missing:
            raise ValidationError({"episodes": f"not verified episodes of this study: {missing}"})
        made = release_requests.create_request(request.user, self.study, episodes=episodes,
                                               purpose=body.validated_data["purpose"])
        return self._answer(made, status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ReleaseRequestSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, *args, **kwargs):
        release = self.get_object()
        release_requests.submit(request.user, release)
        return self._answer(release)

    @extend_schema(request=ApproveSerializer, responses=ReleaseRequestSerializer,
                   description="Approve as an ethics officer (never the requester). 403 with second_factor "
                               "'required' when a fresh second factor is needed: send otp_code.")
    @action(detail=True, methods=["post"])
    def approve(self, request, *args, **kwargs):
        release = self.get_object()
        body = ApproveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        session = getattr(request, "session", None)
        evidence = approval.SecondFactor(
            passed_at=second_factor_passed_at(session) if session is not None and request.auth is None else None,
            code=body.validated_data["otp_code"], ip=client_ip(request))
        approval.approve(request.user, release, manifest_sha256=body.validated_data["manifest_sha256"],
                         second_factor=evidence)
        return self._answer(release)

    @extend_schema(request=RejectSerializer, responses=ReleaseRequestSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, *args, **kwargs):
        release = self.get_object()
        body = RejectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        release_requests.reject(request.user, release, reason=body.validated_data["reason"])
        return self._answer(release)

    @extend_schema(request=None, responses=ReleaseRequestSerializer,
                   description="Re-verify the request's shards against their receipts now (in the worker).")
    @action(detail=True, methods=["post"])
    def reverify(self, request, *args, **kwargs):
        release = self.get_object()
        release_requests.reverify(request.user, release)
        return self._answer(release, status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses=ReleaseRequestSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request, *args, **kwargs):
        release = self.get_object()
        publish.retry_release(request.user, release)
        return self._answer(release)

    @extend_schema(responses={200: OpenApiTypes.OBJECT},
                   parameters=[OpenApiParameter("episode_index", int, OpenApiParameter.PATH)],
                   description="The review viewer's data of one episode of the request: pinch distances, tracking "
                               "flags, joints and head in 2D (downsampled), segments, gap rows, removed retries.")
    @action(detail=True, methods=["get"], url_path=r"episodes/(?P<episode_index>[0-9]+)/review")
    def review(self, request, *args, episode_index: str, **kwargs):
        release = self.get_object()
        item = get_object_or_404(ReleaseItem.objects.select_related("episode__recording"), request=release,
                                 episode_index=int(episode_index))
        return Response(review.episode_review(item))
