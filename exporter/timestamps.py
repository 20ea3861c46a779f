"""How a moment is written in every file the exporter and the portal make (shard metadata, receipts, dataset
info, release manifests, tombstones): RFC 3339 in UTC, whole seconds, ``Z``."""

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ``; a naive one is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
