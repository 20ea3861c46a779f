"""REST API of a study's alerts, for its coordinators and ethics officers (``/api/studies/<study_code>/alerts/``):
list (``?state=`` open, acknowledged, resolved or unresolved), read with the problems of a fixity alert,
``acknowledge`` and ``resolve`` with a note. The same service functions as the pages."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.fixity.models import Alert, FixityProblem
from portal.fixity.services import alerts

PROBLEMS_SHOWN = 100


class ProblemSerializer(serializers.ModelSerializer):
    object = serializers.CharField(source="object_name")
    run = serializers.IntegerField(source="run_id")

    class Meta:
        model = FixityProblem
        fields = ["kind", "storage", "object", "detail", "run"]


class AlertSerializer(serializers.ModelSerializer):
    episode = serializers.SerializerMethodField()
    acknowledged_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    resolved_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Alert
        fields = ["id", "kind", "state", "message", "created_at", "episode", "run", "acknowledged_at",
                  "acknowledged_by", "acknowledged_note", "resolved_at", "resolved_by", "resolved_note", "emailed_at"]
        read_only_fields = fields

    def get_episode(self, alert) -> str | None:
        return alert.episode.folder if alert.episode_id else None


class AlertDetailSerializer(AlertSerializer):
    problems = serializers.SerializerMethodField(help_text=f"The first {PROBLEMS_SHOWN} problems it reports.")

    class Meta(AlertSerializer.Meta):
        fields = [*AlertSerializer.Meta.fields, "problems"]
        read_only_fields = fields

    def get_problems(self, alert) -> list[dict]:
        return ProblemSerializer(alert.problems.order_by("pk")[:PROBLEMS_SHOWN], many=True).data


class NoteSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=alerts.NOTE_MAX_CHARS)


STATES = [*Alert.State.values, "unresolved"]


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("state", OpenApiTypes.STR, enum=STATES, description="only alerts in this state")]))
class AlertViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Alert.objects.none()
    keyset = ("-created_at", "-pk")
    required_roles = (Role.COORDINATOR, Role.ETHICS_OFFICER)

    def get_serializer_class(self):
        return AlertSerializer if self.action == "list" else AlertDetailSerializer

    def get_queryset(self):
        rows = Alert.objects.select_related("episode", "acknowledged_by", "resolved_by").defer("study_id")
        state = self.request.query_params.get("state")
        if self.action == "list" and state:
            if state not in STATES:
                raise ValidationError({"state": f"expected one of {', '.join(STATES)}"})
            rows = rows.filter(state__in=Alert.UNRESOLVED) if state == "unresolved" else rows.filter(state=state)
        return rows

    def _act(self, request, act):
        alert = self.get_object()
        body = NoteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        act(request.user, alert, note=body.validated_data["note"])
        return Response(AlertDetailSerializer(alert).data)

    @extend_schema(request=NoteSerializer, responses=AlertDetailSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, *args, **kwargs):
        return self._act(request, alerts.acknowledge)

    @extend_schema(request=NoteSerializer, responses=AlertDetailSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request, *args, **kwargs):
        return self._act(request, alerts.resolve)
