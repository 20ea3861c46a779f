from django.contrib import admin

from portal.audit.models import AuditEvent
from portal.core.admin import ReadOnlyAdmin


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "created_at", "actor_label", "action", "target_type", "target_label", "study_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["action", "actor_label", "target_label", "target_id"]
    ordering = ["-seq"]
