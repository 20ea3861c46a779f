"""The recording pipeline's services, one module per job: ``ingest`` (validate, quarantine or accept),
``audio`` (keep encrypted, strip, purge), ``export``, ``verification``, ``inbox``; ``history`` is the one
place a recording changes state. Views, the API, the admin, commands and tasks call these functions.

Storage layout (see docs/pipeline.md):
- ``captures``: ``<study>/<recording uid>/incoming/<name>`` (an upload awaiting ingest, deleted after it),
  ``.../source/<path>`` (the silent capture source that exports read), ``.../audio/<path>.enc`` (kept raw
  audio, encrypted with the recording's key).
- ``shards``: ``<study>/episode-NNNNNN/...``: objects are uploaded to their final keys with the receipt
  last; the database (``Episode.exported_at``) is the truth, so objects under a prefix whose episode is
  not marked exported are leftovers of an interrupted attempt and are deleted before the next one.
"""
