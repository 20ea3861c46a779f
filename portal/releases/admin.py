"""Read-only admin views of releases; the one action, approving, goes through the same service as the pages."""

from django.contrib import admin, messages

from portal.accounts.services import second_factor_passed_at
from portal.core.admin import ReadOnlyAdmin
from portal.core.errors import admin_refusals
from portal.releases.models import Approval, Release, ReleaseRequest
from portal.releases.services import approval


@admin.register(ReleaseRequest)
class ReleaseRequestAdmin(ReadOnlyAdmin):
    list_display = ["release_id", "study", "state", "episode_count", "requested_by", "created_at", "decided_at"]
    list_filter = ["study", "state"]
    search_fields = ["purpose", "manifest_sha256"]
    actions = ["approve"]

    @admin.action(description="Approve the selected release requests (as an ethics officer of their study)")
    def approve(self, request, queryset):
        evidence = approval.SecondFactor(passed_at=second_factor_passed_at(request.session))
        for release in queryset.select_related("study"):
            with admin_refusals(self, request, release) as outcome:
                approval.approve(request.user, release, manifest_sha256=release.manifest_sha256,
                                 second_factor=evidence)
            if not outcome.refused:
                self.message_user(request, f"{release} approved by you.", messages.SUCCESS)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ["request", "study", "officer", "approved_at", "manifest_sha256"]
    list_filter = ["study"]


@admin.register(Release)
class ReleaseAdmin(ReadOnlyAdmin):
    list_display = ["request", "study", "objects_copied", "objects_total", "attempts", "finished_at"]
    list_filter = ["study"]
    exclude = ["manifest", "signature"]
