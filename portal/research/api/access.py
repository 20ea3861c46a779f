"""Access: a researcher's access requests (``/api/access-requests/``: list, ask accepting the agreement, cancel);
under ``/api/studies/<study_code>/``: the data-use agreement and its acceptance, and the access requests the study's
coordinators and ethics officers grant, refuse or revoke (``services.access``)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin, api_rows_for, token_allows
from portal.core.integers import api_integer
from portal.research.models import AccessRequest
from portal.research.services import access
from portal.studies.models import Study

STEWARDS = (Role.COORDINATOR, Role.ETHICS_OFFICER)


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
