from django.contrib import admin

from portal.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["seq", "created_at", "actor_label", "action", "target_type", "target_label", "study_id"]
    list_filter = ["action", "target_type"]
    search_fields = ["action", "actor_label", "target_label", "target_id"]
    ordering = ["-seq"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
