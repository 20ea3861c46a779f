"""Read-only admin views of the pipeline: every change goes through the pages, the API or the services."""

from django.contrib import admin

from portal.core.admin import ReadOnlyAdmin
from portal.recordings.models import Alert, Episode, PurgeReceipt, Recording, Verification


@admin.register(Recording)
class RecordingAdmin(ReadOnlyAdmin):
    list_display = ["capture_id", "study", "state", "audio", "via", "recorded_at", "created_at"]
    list_filter = ["study", "state", "audio", "via"]
    search_fields = ["capture_id", "uid", "content_sha256"]


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdmin):
    list_display = ["folder", "study", "from_index", "length", "exported_at", "receipt_status"]
    list_filter = ["study", "receipt_status"]


@admin.register(PurgeReceipt)
class PurgeReceiptAdmin(ReadOnlyAdmin):
    list_display = ["recording", "study", "rule", "purged_at", "key_destroyed"]
    list_filter = ["study", "rule"]


@admin.register(Verification)
class VerificationAdmin(ReadOnlyAdmin):
    list_display = ["episode", "study", "checked_at", "ok"]
    list_filter = ["study", "ok"]


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ["message", "study", "created_at", "resolved_at"]
    list_filter = ["study"]
