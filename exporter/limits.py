"""Bounds on one capture source, defined here once. A deployment may lower them, never raise them
(the portal's ``CERES_MAX_SOURCE_BYTES`` and ``CERES_MAX_SOURCE_ENTRIES`` are checked against these).

An hour of 4K camera and its journal fit comfortably. Member paths: the spec's layout is two levels deep
(plus one top-level folder in a ZIP); 255 bytes is the longest file name Linux and the usual object stores
accept.
"""

MAX_SOURCE_BYTES = 64 * 1024**3
MAX_SOURCE_ENTRIES = 1000
MAX_MEMBER_DEPTH = 8
MAX_NAME_BYTES = 255
# capture.json and a task specification are a few levels deep; deeper nesting is refused before anything walks it.
MAX_JSON_DEPTH = 64
