from django.contrib import admin
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.core.admin import ReadOnlyAdmin


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "when", "actor_label", "action", "target", "study_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["action", "actor_label", "target_label", "target_id"]
    ordering = ["-seq"]

    @admin.display(description="when", ordering="created_at")
    def when(self, event: AuditEvent) -> str:
        return f"{timezone.localtime(event.created_at):%Y-%m-%d %H:%M:%S}"

    @admin.display(description="target", ordering="target_label")
    def target(self, event: AuditEvent) -> str:
        return f"{event.target_type.rpartition('.')[2]} {event.target_label}"

    def changelist_view(self, request, extra_context=None):
        # The event list needs the page's width at 1280 px: no app sidebar here (the other admin pages keep it).
        return super().changelist_view(request, {**(extra_context or {}), "is_nav_sidebar_enabled": False})
