"""REST API of a study's audit log, under ``/api/studies/<study_code>/audit-events/``: the events newest first with
the audit view's filters (the same parameters, the same form), and one event in full by its ``seq``. With the
study's other pages of the audit log (``audit_views``)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.audit import study_log
from portal.audit.forms import AuditFilter
from portal.audit.models import AuditEvent

BOTH = (Role.COORDINATOR, Role.ETHICS_OFFICER)


class AuditEventListSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_label", read_only=True)
    target = serializers.CharField(source="target_label", read_only=True)

    class Meta:
        model = AuditEvent
        fields = ["seq", "created_at", "actor", "action", "target_type", "target_id", "target"]


class AuditEventSerializer(AuditEventListSerializer):
    class Meta(AuditEventListSerializer.Meta):
        fields = [*AuditEventListSerializer.Meta.fields, "actor_id", "before", "after", "prev_hash", "hash",
                  "hash_version"]


FILTERS = [
    OpenApiParameter("target_type", str, description="The object's type, e.g. recordings.recording."),
    OpenApiParameter("target_id", str, description="The object's id (with target_type)."),
    OpenApiParameter("actor", str, description="A username, exactly."),
    OpenApiParameter("action", str, description="An action exactly, or a prefix ending in * (recording.*)."),
    OpenApiParameter("since", OpenApiTypes.DATE, description="From this day (the portal's time zone)."),
    OpenApiParameter("until", OpenApiTypes.DATE, description="Up to and including this day."),
    OpenApiParameter("recording", str, description="A recording's uid: its history from upload to release."),
    OpenApiParameter("demonstrator", str, description="A designator: its history from consent to withdrawal."),
]


@extend_schema_view(list=extend_schema(parameters=FILTERS),
                    retrieve=extend_schema(parameters=[OpenApiParameter("seq", int, OpenApiParameter.PATH)]))
class AuditEventViewSet(StudyScopedAPIMixin, viewsets.ReadOnlyModelViewSet):
    """The study's audit events newest first (``seq`` descending), filtered as on the audit view; one event in full
    (before, after, its hashes) by its ``seq``. For the study's coordinators and ethics officers."""

    queryset = AuditEvent.objects.none()  # the model, for the schema; get_queryset reads the study's events
    lookup_field = "seq"
    lookup_value_regex = "[0-9]+"
    keyset = study_log.ORDER
    required_roles = BOTH

    def get_serializer_class(self):
        return AuditEventListSerializer if self.action == "list" else AuditEventSerializer

    def get_queryset(self):
        if self.action != "list":
            return study_log.events(self.study)
        filters = AuditFilter(self.request.query_params)
        log = filters.log()
        if log is None:
            raise ValidationError(filters.errors)
        return study_log.events(self.study, log).only(*study_log.LISTED)
