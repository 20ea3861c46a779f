"""The audit log's signed checkpoints in the ``releases`` storage, for the fixity check: units of no study, one per
month folder under ``CERES_AUDIT_CHECKPOINT_PREFIX``, each expecting exactly the checkpoints the database notes
there (``AuditCheckpoint``). A checkpoint's object is reproducible from its note: the JSON is canonical and Ed25519
signatures are deterministic, so its SHA-256 is that of the note encoded and signed again with the signing key. A
month holding a checkpoint signed with an earlier key (its fingerprint is not the current key's) cannot be
reproduced: it is listed, not checked (``audit_verify`` still checks the newest checkpoint's signature). Run
only over the whole store, not for chosen studies."""

from __future__ import annotations

import functools
import hashlib

from portal.audit import checkpoints
from portal.audit.models import AuditCheckpoint
from portal.core import signing, storage
from portal.fixity import registry

STORAGE = "releases"


def _month(prefix: str, month: str) -> list[registry.Expected]:
    key = signing.signing_key()
    expected = []
    for note in AuditCheckpoint.objects.filter(name__startswith=f"{prefix}{month}/").order_by("pk"):
        data = checkpoints.encode(checkpoints.Checkpoint(seq=note.seq, hash=note.hash, count=note.event_count,
                                                         keyed_from=note.keyed_from, at=note.created_at), key)
        expected.append(registry.Expected(note.name, hashlib.sha256(data).hexdigest(), len(data)))
    return expected


@registry.source
def checkpoint_units(studies):
    if studies is not None:
        return
    prefix = checkpoints.prefix()
    current = signing.key_fingerprint()
    months: dict[str, bool] = {}  # month -> every checkpoint noted there is signed with the current key
    for name, key_fingerprint in AuditCheckpoint.objects.order_by().values_list("name", "key_fingerprint").iterator(
            chunk_size=5000):
        if name.startswith(prefix) and "/" in name[len(prefix):]:
            month = name[len(prefix):].split("/", 1)[0]
            months[month] = months.get(month, True) and key_fingerprint == current
    try:
        listed, _ = storage.releases().listdir(prefix.rstrip("/"))
    except FileNotFoundError:
        listed = []
    for month in listed:
        months.setdefault(month, True)
    for month, reproducible in sorted(months.items()):
        label = f"audit checkpoints of {month}"
        if reproducible:
            yield registry.Unit(STORAGE, f"{prefix}{month}/", None, label,
                                expected=functools.partial(_month, prefix, month))
        else:
            yield registry.Unit(STORAGE, f"{prefix}{month}/", None, label, claimed=True)
