"""Admin: read-mostly. Registry rows change only through ``services`` (pages, API, or the actions here)."""

from django.contrib import admin, messages

from portal.core.admin import ReadOnlyAdmin
from portal.core.errors import admin_refusals
from portal.studies.models import ConsentDocument, ConsentEvent, DataUseAgreement, Demonstrator, Headset, Study
from portal.studies.services import consent as consent_service
from portal.studies.services import study as study_service


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["code", "title", "status", "audio_policy", "approvals_required"]
    list_filter = ["status", "audio_policy"]
    search_fields = ["code", "title", "project_id"]

    def get_readonly_fields(self, request, obj=None):
        # Existing studies change only through the registry pages, which audit every change. A new one starts
        # under the default face policy: choosing it is its ethics officers' decision (the settings page).
        return [f.name for f in Study._meta.fields] if obj else ["face_policy"]

    def save_model(self, request, obj, form, change):
        if change:
            return
        created = study_service.create_study(
            request.user, code=obj.code, title=obj.title, project_id=obj.project_id, status=obj.status,
            audio_policy=obj.audio_policy, audio_retain_days=obj.audio_retain_days,
            approvals_required=obj.approvals_required,
        )
        obj.pk = created.pk

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Headset)
class HeadsetAdmin(ReadOnlyAdmin):
    list_display = ["headset_id", "study", "model", "registered_by", "registered_at", "assigned_on", "retired_on"]
    list_filter = ["study"]
    list_select_related = ["study", "registered_by"]
    search_fields = ["headset_id", "model"]


@admin.register(DataUseAgreement)
class DataUseAgreementAdmin(ReadOnlyAdmin):
    list_display = ["study", "version", "licence", "sha256", "created_by", "created_at"]
    list_filter = ["study"]
    list_select_related = ["study", "created_by"]


@admin.register(Demonstrator)
class DemonstratorAdmin(ReadOnlyAdmin):
    list_display = ["designator", "study", "headset", "created_at"]
    list_filter = ["study"]
    list_select_related = ["study", "headset"]
    search_fields = ["designator"]


@admin.register(ConsentDocument)
class ConsentDocumentAdmin(ReadOnlyAdmin):
    list_display = ["identifier", "version", "study", "issued_on", "sha256", "uploaded_by", "accepted_by",
                    "accepted_at"]
    list_filter = ["study"]
    list_select_related = ["study", "uploaded_by", "accepted_by"]
    search_fields = ["identifier", "sha256"]
    actions = ["accept"]

    @admin.action(description="Accept the selected consent documents (as an ethics officer of their study)")
    def accept(self, request, queryset):
        for document in queryset:
            with admin_refusals(self, request, document) as outcome:
                consent_service.accept_consent_document(request.user, document)
            if not outcome.refused:
                self.message_user(request, f"{document} accepted.", messages.SUCCESS)


@admin.register(ConsentEvent)
class ConsentEventAdmin(ReadOnlyAdmin):
    list_display = ["demonstrator", "kind", "event_date", "document", "scopes", "study", "recorded_by",
                    "recorded_at"]
    list_filter = ["study", "kind"]
    list_select_related = ["study", "demonstrator", "document", "recorded_by"]
    search_fields = ["demonstrator__designator"]
