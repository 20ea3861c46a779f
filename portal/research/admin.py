"""Read-only admin views of researcher access; every change goes through the pages, the API and the services.
The links issued grow with every download: their list is the big-table admin's."""

from django.contrib import admin

from portal.core.admin import BigTableAdmin, ReadOnlyAdmin
from portal.research.models import AccessRequest, AgreementAcceptance, Dataset, IssuedLink


@admin.register(AccessRequest)
class AccessRequestAdmin(ReadOnlyAdmin):
    list_display = ["researcher", "study", "state", "created_at", "decided_by", "decided_at", "expires_at"]
    list_filter = ["study", "state"]
    list_select_related = ["researcher", "study", "decided_by"]
    search_fields = ["researcher__username", "purpose"]


@admin.register(AgreementAcceptance)
class AgreementAcceptanceAdmin(ReadOnlyAdmin):
    list_display = ["user", "study", "version", "sha256", "accepted_at"]
    list_filter = ["study"]
    list_select_related = ["user", "study"]


@admin.register(Dataset)
class DatasetAdmin(ReadOnlyAdmin):
    list_display = ["dataset_id", "study", "state", "episode_count", "requested_by", "created_at", "finished_at"]
    list_filter = ["study", "state"]
    list_select_related = ["study", "requested_by"]
    exclude = ["manifest", "signature"]


@admin.register(IssuedLink)
class IssuedLinkAdmin(BigTableAdmin):
    list_display = ["issued_at", "user", "study", "release", "dataset", "path", "expires_at", "via"]
    list_select_related = ["user", "study", "release", "dataset"]
    sortable_by = ["issued_at"]
