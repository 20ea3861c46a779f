"""Read-only admin views of the pipeline: every change goes through the pages, the API or the services."""

from django.contrib import admin

from portal.core.admin import BigTableAdmin, ReadOnlyAdmin
from portal.recordings.models import Episode, PurgeReceipt, Recording, Verification


@admin.register(Recording)
class RecordingAdmin(BigTableAdmin):
    list_display = ["capture_id", "study", "state", "audio", "via", "recorded_at", "created_at"]
    list_filter = ["study", "state", "audio", "via"]
    search_fields = ["capture_id", "uid", "content_sha256"]
    list_select_related = ["study"]
    list_defer = ("claims", "summary", "source_files", "audio_objects", "reason")
    # Newest first across studies: the primary key's index (the lists' indexes begin with the study).
    ordering = ["-pk"]
    sortable_by = []


@admin.register(Episode)
class EpisodeAdmin(BigTableAdmin):
    list_display = ["folder", "study", "from_index", "length", "exported_at", "receipt_status"]
    list_filter = ["study", "receipt_status"]
    list_select_related = ["study"]
    list_defer = ("shard_files", "stored_checksums")
    ordering = ["-pk"]
    sortable_by = []


@admin.register(PurgeReceipt)
class PurgeReceiptAdmin(ReadOnlyAdmin):
    list_display = ["recording", "study", "rule", "purged_at", "key_destroyed"]
    list_filter = ["study", "rule"]
    list_select_related = ["recording", "study"]


@admin.register(Verification)
class VerificationAdmin(BigTableAdmin):
    list_display = ["episode", "study", "checked_at", "ok"]
    list_filter = ["study", "ok"]
    list_select_related = ["episode", "study"]
    list_defer = ("problems",)
    ordering = ["-pk"]
    sortable_by = []
