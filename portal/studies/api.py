"""REST API of the study registry, under ``/api/studies/`` and ``/api/studies/<study_code>/...``.

The same service functions as the pages do every change; a refusal becomes a 400 with its message
(``portal.core.errors.api_exception_handler``). Lists are paginated (``?page=``) and take the filters
documented in the schema.
"""

from __future__ import annotations

from datetime import date

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin, active_roles, api_studies_for
from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Headset, Study
from portal.studies.services import approval_policy
from portal.studies.services import consent as consent_service
from portal.studies.services import demonstrators as demonstrator_service
from portal.studies.services import headsets as headset_service
from portal.studies.services import study as study_service

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
READ_ROLES = (COORDINATOR, ETHICS)


def _flag(request: Request, name: str) -> bool | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if value.lower() in {"true", "1", "yes"}:
        return True
    if value.lower() in {"false", "0", "no"}:
        return False
    raise ValidationError({name: f"expected true or false, got {value!r}"})


class ScopedSlugRelatedField(serializers.SlugRelatedField):
    """Looks up in the current study scope, evaluated per request (never at import)."""

    def get_queryset(self):
        return self.queryset.model.objects.all()


class ScopedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    def get_queryset(self):
        return self.queryset.model.objects.all()


# --- studies ----------------------------------------------------------------------------------


class StudySerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField()
    data_use_agreement_version = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = ["code", "title", "status", "project_id", "audio_policy", "audio_retain_days", "face_policy",
                  "approvals_required", "approval_second_factor", "carry_over_approvals", "data_use_agreement_version",
                  "roles"]

    def get_roles(self, study: Study) -> list[str]:
        return sorted(active_roles(self.context["request"].user, study))

    def get_data_use_agreement_version(self, study: Study) -> int | None:
        agreement = study_service.current_data_use_agreement(study)
        return agreement.version if agreement else None


class StudyViewSet(viewsets.ReadOnlyModelViewSet):
    """The studies in which the caller holds an active role."""

    serializer_class = StudySerializer
    keyset = ("code",)
    lookup_field = "code"

    def get_queryset(self):
        return api_studies_for(self.request).order_by("code")


# --- headsets ---------------------------------------------------------------------------------


class HeadsetSerializer(serializers.ModelSerializer):
    registered_by = serializers.StringRelatedField()

    class Meta:
        model = Headset
        fields = ["id", "headset_id", "model", "registered_by", "registered_at", "assigned_on", "retired_on"]
        read_only_fields = ["registered_by", "registered_at", "retired_on"]
        extra_kwargs = {"assigned_on": {"required": False,
                                        "help_text": "In the study since (blank: the registration date, today); "
                                                     "never later than the registration."}}
        # Uniqueness is the service's rule; the model validator would need a study scope.
        validators = []


class HeadsetImportSerializer(serializers.Serializer):
    csv_file = serializers.FileField(help_text="Columns headset_id, model and assigned_on (optional); all rows or "
                                               "none.")


class AssignSerializer(serializers.Serializer):
    assigned_on = serializers.DateField(help_text="In the study since: never later than the registration date.")


class RetireSerializer(serializers.Serializer):
    retired_on = serializers.DateField()


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("retired", OpenApiTypes.BOOL, description="Only retired (true) or in-use (false) headsets."),
    OpenApiParameter("headset_id", OpenApiTypes.STR, description="Exact headset ID."),
]))
class HeadsetViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     mixins.CreateModelMixin, viewsets.GenericViewSet):
    queryset = Headset.objects.none()  # the model, for the schema; get_queryset reads in scope
    serializer_class = HeadsetSerializer
    keyset = ("headset_id",)
    required_roles = {"list": READ_ROLES, "retrieve": READ_ROLES, "*": (COORDINATOR,)}
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    def get_queryset(self):
        headsets = Headset.objects.select_related("registered_by").order_by("headset_id")
        retired = _flag(self.request, "retired")
        if retired is not None:
            headsets = headsets.filter(retired_on__isnull=not retired)
        if self.request.query_params.get("headset_id"):
            headsets = headsets.filter(headset_id=self.request.query_params["headset_id"])
        return headsets

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = headset_service.register_headset(self.request.user, self.study,
                                    headset_id=data["headset_id"], model=data.get("model", ""),
                                    assigned_on=data.get("assigned_on"))

    @extend_schema(request={"multipart/form-data": HeadsetImportSerializer}, responses=HeadsetSerializer(many=True))
    @action(detail=False, methods=["post"], url_path="import", serializer_class=HeadsetImportSerializer)
    def import_csv(self, request: Request, study_code: str) -> Response:
        form = HeadsetImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        headsets = headset_service.import_headsets_csv(request.user, self.study, form.validated_data["csv_file"])
        return Response(HeadsetSerializer(headsets, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=AssignSerializer, responses=HeadsetSerializer)
    @action(detail=True, methods=["post"], url_path="assigned-on", serializer_class=AssignSerializer)
    def assign(self, request: Request, study_code: str, pk: str) -> Response:
        return self._date_of_headset(request, AssignSerializer, headset_service.declare_assigned_on)

    @extend_schema(request=RetireSerializer, responses=HeadsetSerializer)
    @action(detail=True, methods=["post"], serializer_class=RetireSerializer)
    def retire(self, request: Request, study_code: str, pk: str) -> Response:
        return self._date_of_headset(request, RetireSerializer, headset_service.retire_headset)

    def _date_of_headset(self, request: Request, form_class: type[serializers.Serializer], service) -> Response:
        """A headset's one-date action: the service called with the date, the headset as it is then."""
        headset = self.get_object()
        form = form_class(data=request.data)
        form.is_valid(raise_exception=True)
        (value,) = form.validated_data.values()
        service(request.user, headset, value)
        return Response(HeadsetSerializer(headset).data)


# --- demonstrators ----------------------------------------------------------------------------


class DemonstratorSerializer(serializers.ModelSerializer):
    designator = serializers.CharField(max_length=100, required=False, allow_blank=True,
                                       help_text="Blank: generated (family pair from the headset).")
    headset = ScopedSlugRelatedField(slug_field="headset_id", queryset=Headset.objects.none(), required=False,
                                     allow_null=True)

    class Meta:
        model = Demonstrator
        fields = ["id", "designator", "headset", "created_at"]
        read_only_fields = ["created_at"]


class CoverageSerializer(serializers.Serializer):
    covered = serializers.BooleanField()
    reason = serializers.CharField()
    event = serializers.IntegerField(source="event.pk", allow_null=True, default=None)
    document = serializers.CharField(allow_null=True, default=None)


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("headset", OpenApiTypes.STR, description="Headset ID that gave the family pair."),
    OpenApiParameter("designator", OpenApiTypes.STR, description="Exact designator."),
]))
class DemonstratorViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          mixins.CreateModelMixin, viewsets.GenericViewSet):
    queryset = Demonstrator.objects.none()  # the model, for the schema; get_queryset reads in scope
    serializer_class = DemonstratorSerializer
    keyset = ("designator",)
    required_roles = {"list": READ_ROLES, "retrieve": READ_ROLES, "coverage": READ_ROLES, "*": (COORDINATOR,)}

    def get_queryset(self):
        demonstrators = Demonstrator.objects.select_related("headset").order_by("designator")
        params = self.request.query_params
        if params.get("headset"):
            demonstrators = demonstrators.filter(headset__headset_id=params["headset"])
        if params.get("designator"):
            designator = demonstrator_service.normalise_designator(params["designator"])
            demonstrators = demonstrators.filter(designator=designator)
        return demonstrators

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = demonstrator_service.create_demonstrator(self.request.user, self.study,
                                    designator=data.get("designator", ""), headset=data.get("headset"))

    @extend_schema(parameters=[
        OpenApiParameter("date", OpenApiTypes.DATE, description="Recording date (default: today)."),
        OpenApiParameter("scope", OpenApiTypes.STR, enum=list(ConsentEvent.Scope.values), required=True),
    ], responses=CoverageSerializer)
    @action(detail=True, methods=["get"])
    def coverage(self, request: Request, study_code: str, pk: str) -> Response:
        demonstrator = self.get_object()
        try:
            on_date = date.fromisoformat(request.query_params.get("date") or timezone.localdate().isoformat())
        except ValueError:
            raise ValidationError({"date": "expected YYYY-MM-DD"}) from None
        coverage = consent_service.consent_coverage(demonstrator, on_date, request.query_params.get("scope", ""))
        return Response({"covered": coverage.covered, "reason": coverage.reason,
                         "event": coverage.event.pk if coverage.event else None,
                         "document": str(coverage.document) if coverage.document else None})


# --- consent documents ------------------------------------------------------------------------


class ConsentDocumentSerializer(serializers.ModelSerializer):
    file = serializers.FileField(write_only=True, help_text="The exact PDF or UTF-8 text.")
    uploaded_by = serializers.StringRelatedField()
    accepted_by = serializers.StringRelatedField()

    class Meta:
        model = ConsentDocument
        fields = ["id", "identifier", "version", "issued_on", "file", "media_type", "sha256", "size", "uploaded_by",
                  "uploaded_at", "accepted_by", "accepted_at"]
        read_only_fields = ["media_type", "sha256", "size", "uploaded_by", "uploaded_at", "accepted_by",
                            "accepted_at"]
        extra_kwargs = {"issued_on": {"required": False}}
        validators = []


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("accepted", OpenApiTypes.BOOL, description="Only accepted (true) or pending (false)."),
    OpenApiParameter("identifier", OpenApiTypes.STR),
]))
class ConsentDocumentViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                             mixins.CreateModelMixin, viewsets.GenericViewSet):
    queryset = ConsentDocument.objects.none()  # the model, for the schema; get_queryset reads in scope
    serializer_class = ConsentDocumentSerializer
    keyset = ("identifier", "version")
    required_roles = {"list": READ_ROLES, "retrieve": READ_ROLES, "accept": (ETHICS,), "*": (COORDINATOR,)}
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self):
        documents = ConsentDocument.objects.select_related("uploaded_by", "accepted_by").order_by("identifier",
                                                                                                  "version")
        accepted = _flag(self.request, "accepted")
        if accepted is not None:
            documents = documents.filter(accepted_at__isnull=not accepted)
        if self.request.query_params.get("identifier"):
            documents = documents.filter(identifier=self.request.query_params["identifier"])
        return documents

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = consent_service.upload_consent_document(self.request.user, self.study,
                                    identifier=data["identifier"], version=data["version"],
                                    issued_on=data.get("issued_on"), uploaded_file=data["file"])

    @extend_schema(request=None, responses=ConsentDocumentSerializer)
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, study_code: str, pk: str) -> Response:
        document = self.get_object()
        consent_service.accept_consent_document(request.user, document)
        return Response(ConsentDocumentSerializer(document).data)


# --- consent events ---------------------------------------------------------------------------


class ConsentEventSerializer(serializers.ModelSerializer):
    demonstrator = ScopedSlugRelatedField(slug_field="designator", queryset=Demonstrator.objects.none())
    document = ScopedPrimaryKeyRelatedField(queryset=ConsentDocument.objects.none(), required=False,
                                            allow_null=True, help_text="For kind=given.")
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=ConsentEvent.Scope.choices), required=False,
                                   help_text="For kind=given.")
    recorded_by = serializers.StringRelatedField()

    class Meta:
        model = ConsentEvent
        fields = ["id", "demonstrator", "kind", "event_date", "document", "scopes", "reason", "recorded_by",
                  "recorded_at"]
        read_only_fields = ["recorded_by", "recorded_at"]

    def validate(self, attrs):
        if attrs["kind"] == ConsentEvent.Kind.GIVEN and not attrs.get("document"):
            raise ValidationError({"document": "consent given needs the consent document"})
        if attrs["kind"] == ConsentEvent.Kind.WITHDRAWN and attrs.get("document"):
            raise ValidationError({"document": "a withdrawal names no document"})
        return attrs


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("demonstrator", OpenApiTypes.STR, description="Designator."),
    OpenApiParameter("kind", OpenApiTypes.STR, enum=list(ConsentEvent.Kind.values)),
]))
class ConsentEventViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Append-only: events are created (consent given or withdrawn), never changed or deleted."""

    queryset = ConsentEvent.objects.none()  # the model, for the schema; get_queryset reads in scope
    serializer_class = ConsentEventSerializer
    keyset = ("event_date", "pk")
    required_roles = {"list": READ_ROLES, "retrieve": READ_ROLES, "*": (COORDINATOR,)}

    def get_queryset(self):
        events = ConsentEvent.objects.select_related("demonstrator", "document", "recorded_by").order_by(
            "event_date", "pk")
        params = self.request.query_params
        if params.get("demonstrator"):
            designator = demonstrator_service.normalise_designator(params["demonstrator"])
            events = events.filter(demonstrator__designator=designator)
        if params.get("kind"):
            events = events.filter(kind=params["kind"])
        return events

    def perform_create(self, serializer):
        data = serializer.validated_data
        if data["kind"] == ConsentEvent.Kind.GIVEN:
            serializer.instance = consent_service.give_consent(self.request.user, data["demonstrator"],
                                        document=data["document"], consent_date=data["event_date"],
                                        scopes=data.get("scopes", []))
        else:
            serializer.instance = self.withdraw(data)

    def withdraw(self, data: dict) -> ConsentEvent:
        """A withdrawal reaches raw audio and released data, which the registry does not hold: the view set routed
        at this URL is research's subclass (``research/api/withdrawals.py``), which makes it."""
        raise NotImplementedError("consent is withdrawn through research.services.withdrawals.withdraw_consent")


# --- approval policy ---------------------------------------------------------------------------


class ApprovalPolicySerializer(serializers.Serializer):
    approvals_required = serializers.IntegerField(read_only=True, help_text="Distinct ethics officers' approvals a "
                                                  "release needs now (a request keeps the number it was submitted "
                                                  "under).")
    pending_approvals_required = serializers.IntegerField(read_only=True, allow_null=True,
                                                          help_text="A number below 2 awaiting a second ethics "
                                                                    "officer's confirmation.")
    pending_approvals_by = serializers.CharField(source="pending_approvals_by.username", read_only=True,
                                                 allow_null=True, default=None)
    pending_approvals_at = serializers.DateTimeField(read_only=True, allow_null=True)


class ApprovalsNumberSerializer(serializers.Serializer):
    approvals_required = serializers.IntegerField(min_value=1, max_value=approval_policy.MOST)


class ApprovalPolicyViewSet(StudyScopedAPIMixin, viewsets.GenericViewSet):
    """How many approvals a release of the study needs: read by its coordinators and ethics officers, changed
    only by its ethics officers (``POST``: 2 or more at once, fewer than 2 proposed; ``confirm/``: a second
    officer confirms a proposal), through the same service as the settings page."""

    serializer_class = ApprovalPolicySerializer
    required_roles = {"list": READ_ROLES, "*": (ETHICS,)}
    pagination_class = None

    def _answer(self, code: int = status.HTTP_200_OK) -> Response:
        return Response(ApprovalPolicySerializer(self.study).data, status=code)

    def list(self, request: Request, study_code: str) -> Response:
        return self._answer()

    @extend_schema(request=ApprovalsNumberSerializer, responses=ApprovalPolicySerializer)
    def create(self, request: Request, study_code: str) -> Response:
        number = ApprovalsNumberSerializer(data=request.data)
        number.is_valid(raise_exception=True)
        approval_policy.set_approvals_required(request.user, self.study, number.validated_data["approvals_required"])
        return self._answer()

    @extend_schema(request=ApprovalsNumberSerializer, responses=ApprovalPolicySerializer)
    @action(detail=False, methods=["post"])
    def confirm(self, request: Request, study_code: str) -> Response:
        number = ApprovalsNumberSerializer(data=request.data)
        number.is_valid(raise_exception=True)
        approval_policy.confirm_approvals_required(request.user, self.study,
                                                   number.validated_data["approvals_required"])
        return self._answer()
