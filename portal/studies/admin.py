from django.contrib import admin

from portal.studies import services
from portal.studies.models import Headset, Study


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["code", "title", "status", "audio_policy", "approvals_required"]
    list_filter = ["status", "audio_policy"]
    search_fields = ["code", "title", "project_id"]

    def get_readonly_fields(self, request, obj=None):
        # Existing studies change only through the registry pages, which audit every change.
        return [f.name for f in Study._meta.fields] if obj else []

    def save_model(self, request, obj, form, change):
        if change:
            return
        created = services.create_study(
            request.user, code=obj.code, title=obj.title, project_id=obj.project_id, status=obj.status,
            audio_policy=obj.audio_policy, audio_retain_days=obj.audio_retain_days,
            approvals_required=obj.approvals_required,
        )
        obj.pk = created.pk

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Headset)
class HeadsetAdmin(admin.ModelAdmin):
    list_display = ["headset_id", "study", "model", "registered_by", "registered_at", "retired_on"]
    list_filter = ["study"]
    search_fields = ["headset_id", "model"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
