"""Bounds on one capture source, defined here once. A deployment may lower them, never raise them
(the portal's ``CERES_MAX_SOURCE_BYTES``, ``CERES_MAX_SOURCE_ENTRIES`` and ``CERES_MAX_SOURCE_EXPANSION`` are
checked against these).

An hour of 4K camera and its journal fit comfortably. Member paths: the spec's layout is two levels deep
(plus one top-level folder in a ZIP); 255 bytes is the longest file name Linux and the usual object stores
accept.
"""

from ceres_pull.safefs import MAX_NAME_BYTES

MAX_SOURCE_BYTES = 64 * 1024**3
MAX_SOURCE_ENTRIES = 1000
MAX_MEMBER_DEPTH = 8
# capture.json and a task specification are a few levels deep; deeper nesting is refused before anything walks it.
MAX_JSON_DEPTH = 64
# A ZIP may expand to at most this many times its own size (beyond a small allowance that lets a tiny archive
# hold a few compressible files). A capture's video is stored compressed already, so a real source stays far
# below this; a bomb (1 MB expanding to 1 GiB) is refused before, or as soon as, it passes it.
MAX_EXPANSION_RATIO = 100
EXPANSION_ALLOWANCE = 4 * 1024**2
# What one entry of a ZIP's central directory may take (its fixed 46 bytes, a name of MAX_MEMBER_DEPTH parts of
# MAX_NAME_BYTES, and room for the extra fields and comment writers add): bounds the directory's size before
# it is read.
MAX_DIRECTORY_ENTRY_BYTES = 46 + MAX_MEMBER_DEPTH * (MAX_NAME_BYTES + 1) + 1024
