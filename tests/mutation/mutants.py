"""The mutants ``run.py`` tries: each breaks one claim the docs make about the code under test.

``original`` must occur exactly once in ``path`` (the runner refuses a stale entry); ``tests`` are the test
files that should notice. Add a mutant when a doc states a rule; keep the list to tens, not thousands.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    path: str
    original: str
    mutated: str
    claim: str
    tests: tuple[str, ...]


SOURCE = "exporter/source.py"
AUDIT = "portal/audit/services.py"
AUDIT_MODELS = "portal/audit/models.py"
CHECKPOINTS = "portal/audit/checkpoints.py"
CRYPTO = "portal/recordings/crypto.py"
EXPORT = "portal/recordings/services/export.py"
VERIFY = "portal/recordings/services/verification.py"
RECEIPT = "exporter/receipt.py"
INGEST = "portal/recordings/services/ingest.py"
AUDIO = "portal/recordings/services/audio.py"
HISTORY = "portal/recordings/services/history.py"
STATES = "portal/core/states.py"
LEASES = "portal/core/leases.py"
INBOX = "portal/recordings/services/inbox.py"
HEADSETS = "portal/studies/services/headsets.py"
FIXITY = "portal/fixity/services/runs.py"
ALERTS = "portal/fixity/services/alerts.py"

T_UNPACK = ("tests/exporter/test_unpack.py", "tests/portal/recordings/test_hostile_sources.py")
T_SOURCE = ("tests/exporter/test_unpack.py", "tests/exporter/test_bad_input.py", "tests/exporter/test_capture_api.py")
T_AUDIT = ("tests/portal/audit/test_chain.py",)
T_KEYED = ("tests/portal/audit/test_keyed_chain.py", "tests/portal/audit/test_tamper_detection.py")
T_CHECKPOINT = ("tests/portal/audit/test_tamper_detection.py", "tests/portal/audit/test_verification.py",
                "tests/portal/audit/test_checkpoints.py")
T_CRYPTO = ("tests/portal/recordings/test_audio_crypto.py",)
T_EXPORT = ("tests/portal/recordings/test_shard_upload.py", "tests/portal/recordings/test_export.py",
            "tests/portal/recordings/test_tasks.py")
T_VERIFY = ("tests/portal/recordings/test_verification.py", "tests/portal/recordings/test_export.py")
T_INGEST = ("tests/portal/recordings/test_ingest.py", "tests/portal/recordings/test_quarantine_fixes.py",
            "tests/portal/recordings/test_hostile_sources.py")
T_AUDIO = ("tests/portal/recordings/test_audio.py",)
T_HISTORY = ("tests/portal/recordings/test_history.py",)
T_TRANSITIONS = "tests/portal/core/test_transitions.py"
T_INBOX = ("tests/portal/recordings/test_inbox.py",)
T_FIXITY = ("tests/portal/fixity/test_runs.py",)
T_SLICING = ("tests/portal/fixity/test_slicing.py",)
T_ALERTS = ("tests/portal/fixity/test_alerts.py",)

MUTANTS: list[Mutant] = [
    # --- exporter/source.py: unpacking is bounded and refuses hostile paths --------------------------------
    Mutant("source-bytes-not-counted", SOURCE, "            budget.spend(len(block), name)\n", "",
           "unpacking counts the bytes it writes (a folder declares nothing)", T_UNPACK),
    Mutant("source-bytes-limit-off-by-one", SOURCE, "if self.bytes_left < 0:", "if self.bytes_left <= 0:",
           "a source of exactly the byte limit unpacks", T_UNPACK),
    Mutant("source-entries-not-counted", SOURCE, "        self.entries_left -= 1\n", "",
           "at most the entry limit is unpacked", T_UNPACK),
    Mutant("source-entries-limit-off-by-one", SOURCE, "        if self.entries_left < 0:",
           "        if self.entries_left <= 0:", "a source of exactly the entry limit unpacks", T_UNPACK),
    Mutant("source-declared-size-ignored", SOURCE, "            if declared > budget.max_bytes:",
           "            if False:", "a ZIP declaring more than the limit is refused before writing", T_UNPACK),
    Mutant("source-zip-symlink-allowed", SOURCE, "    if kind == stat.S_IFLNK:", "    if False:",
           "symbolic links in a ZIP are refused", T_UNPACK),
    Mutant("source-dotdot-allowed", SOURCE, 'any(part in ("..", "") for part in parts)',
           'any(part in ("",) for part in parts)', "a '..' path is refused (zip-slip)", T_UNPACK),
    Mutant("source-control-char-allowed", SOURCE, '    if any(unicodedata.category(char) == "Cc" for char in name):',
           "    if False:", "a control character in a path is refused", T_UNPACK),
    Mutant("source-depth-off-by-one", SOURCE, "    if len(parts) > MAX_MEMBER_DEPTH:",
           "    if len(parts) >= MAX_MEMBER_DEPTH:", "a path exactly 8 levels deep is accepted", T_UNPACK),
    Mutant("source-duplicates-allowed", SOURCE, "            if repeated:", "            if False:",
           "duplicate ZIP entries are refused", T_UNPACK),
    Mutant("source-file-and-folder-allowed", SOURCE, "            if folder in files:", "            if False:",
           "a path that is both a file and a folder is refused", T_UNPACK),
    Mutant("source-symlink-source-allowed", SOURCE, "    if source.is_symlink():", "    if False:",
           "a capture source that is itself a link is refused", T_UNPACK),
    Mutant("source-any-single-top-folder", SOURCE, "        if len(entries) == 1 and entries[0].is_dir():",
           "        if entries and entries[0].is_dir():",
           "only a ZIP with exactly one top-level folder is read from inside it", T_UNPACK),
    Mutant("source-digest-ignores-paths", SOURCE, "[[path.relative_to(root).as_posix(), file_digest(path)[0]]",
           '[["", file_digest(path)[0]]',
           "the content digest covers file names, not only contents", ("tests/exporter/test_capture_api.py",
                                                                       "tests/portal/recordings/test_ingest.py")),
    Mutant("source-device-id-kept", SOURCE,
           "        return {scrub(k, where): scrub(v, where) for k, v in value.items() if k not in DROPPED_KEYS}",
           "        return {scrub(k, where): scrub(v, where) for k, v in value.items()}",
           "device_id and user_agent are dropped at every depth", ("tests/exporter/test_camera_shard.py",
                                                                   "tests/exporter/test_export.py")),
    Mutant("source-silent-keeps-manifest-audio", SOURCE, '        manifest["audio"]["media"] = None\n',
           "        pass\n", "a silent source's capture.json says audio.media: null", T_AUDIO),
    # --- portal/audit: the hash chain -------------------------------------------------------------------------
    Mutant("audit-link-not-checked", AUDIT, "        if event.prev_hash != self.expected_prev:", "        if False:",
           "an edit with a recomputed hash is caught by the next event's link", T_AUDIT),
    Mutant("audit-hash-not-checked", AUDIT, "        if event.compute_hash() != event.hash:", "        if False:",
           "an edited event is named by its hash", T_AUDIT),
    Mutant("audit-seq-not-checked", AUDIT, "        if event.seq != self.expected_seq:", "        if False:",
           "a deleted event is named by the gap in seq", T_AUDIT),
    Mutant("audit-not-chained", AUDIT, "    return (last.seq, last.hash) if last else (0, GENESIS_HASH)",
           "    return (last.seq, GENESIS_HASH) if last else (0, GENESIS_HASH)", "each event links to the previous one",
           T_AUDIT),
    Mutant("audit-no-append-lock", AUDIT, 'cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])',
           "pass", "two writers never fork the chain (PostgreSQL; needs --with-services)", T_AUDIT),
    # --- portal/audit: the keyed chain and the signed checkpoints ----------------------------------------------
    Mutant("audit-hash-unkeyed", AUDIT_MODELS,
           "return hmac.new(settings.CERES_AUDIT_KEY if key is None else key, payload, hashlib.sha256).hexdigest()",
           "return hashlib.sha256(payload).hexdigest()",
           "new events are HMAC-SHA256 with the audit key: the public algorithm cannot re-make them", T_KEYED),
    Mutant("audit-unkeyed-after-keyed-allowed", AUDIT, "        if event.hash_version == HASH_PLAIN and self.keyed:",
           "        if False:", "an event re-hashed as version 1 after a keyed one is named at its seq", T_KEYED),
    Mutant("audit-keyed-from-ignored", AUDIT,
           "self.keyed_from is not None and event.seq >= self.keyed_from:", "False:",
           "no unkeyed event from the checkpoint's first keyed seq on", T_KEYED),
    Mutant("audit-checkpoint-tail-not-compared", AUDIT, "    elif head < checkpoint.seq:", "    elif False:",
           "events deleted from the end are named against the checkpoint's seq", T_CHECKPOINT),
    Mutant("audit-checkpoint-hash-not-compared", AUDIT,
           "    elif signed is not None and signed.hash != checkpoint.hash:", "    elif False:",
           "the event at the checkpoint's seq must have the hash it signed", T_CHECKPOINT),
    Mutant("audit-checkpoint-signature-not-checked", CHECKPOINTS,
           "        public_key.verify(signature, _signed_bytes(section))", "        pass",
           "a changed checkpoint is refused by its signature", T_CHECKPOINT),
    Mutant("audit-checkpoint-writer-skips-the-anchor", AUDIT,
           "    if anchor is None or anchor.hash != previous.hash:", "    if anchor is None:",
           "a checkpoint is written only when the last one's event still has its hash", T_CHECKPOINT),
    Mutant("audit-unreadable-field-not-named", AUDIT, "        if unreadable := _unreadable(event):",
           "        if unreadable := '':", "an unreadable field is a named break and a recorded failed verification",
           T_CHECKPOINT),
    Mutant("audit-no-checkpoint-after-commit", AUDIT,
           "        event.save()\n        transaction.on_commit(checkpoint_soon)\n", "        event.save()\n",
           "a checkpoint follows committed events within the delay",
           ("tests/portal/audit/test_checkpoint_soon.py",)),
    # --- portal/recordings/crypto.py: sealed raw audio ----------------------------------------------------------
    Mutant("crypto-nonce-without-counter", CRYPTO, '    return prefix + struct.pack(">I?", counter, last)',
           '    return prefix + struct.pack(">I?", 0, last)', "reordered chunks fail to decrypt", T_CRYPTO),
    Mutant("crypto-nonce-without-last-flag", CRYPTO, '    return prefix + struct.pack(">I?", counter, last)',
           '    return prefix + struct.pack(">I?", counter, False)', "a truncated file fails to decrypt", T_CRYPTO),
    Mutant("crypto-associated-data-ignored", CRYPTO,
           "                    out.write(aead.decrypt(_nonce(prefix, counter, not following), block, associated))",
           "                    out.write(aead.decrypt(_nonce(prefix, counter, not following), block, b''))",
           "a file sealed for another recording does not open", T_CRYPTO),
    Mutant("crypto-partial-plain-left", CRYPTO, "        staged.unlink(missing_ok=True)", "        pass",
           "a failed decryption leaves no plain text", T_CRYPTO),
    # --- portal/recordings/services/export.py: the crash-safe upload ----------------------------------------------
    Mutant("export-receipt-first", EXPORT, 'enumerate([*artefacts, {"path": RECEIPT}], start=1)',
           'enumerate([{"path": RECEIPT}, *artefacts], start=1)', "the receipt is stored last", T_EXPORT),
    Mutant("export-leftovers-kept", EXPORT, "    removed = storage.delete_prefix(shards, episode.prefix)",
           "    removed = 0", "a retry replaces what an interrupted attempt left", T_EXPORT),
    Mutant("export-stored-bytes-not-rehashed", EXPORT,
           "        if storage.digest(shards, name) != file_digest(local):", "        if False:",
           "each stored object is re-hashed from the storage", T_EXPORT),
    # Both look-ups: the first alone is an equivalent mutant (the one after the lock finds the same episode).
    Mutant("export-allocation-not-reused", EXPORT,
           "    existing = Episode.objects.filter(recording=recording).first()\n    if existing is not None:\n"
           "        return existing\n    dataset, _ = StudyDataset.objects.select_for_update(no_key=True)"
           ".get_or_create(study=recording.study)\n    existing = Episode.objects.filter(recording=recording).first()",
           "    dataset, _ = StudyDataset.objects.select_for_update(no_key=True).get_or_create(study=recording.study)\n"
           "    existing = None", "a retried export reuses its allocation", T_EXPORT),
    Mutant("export-frame-counter-stuck", EXPORT, "    dataset.next_frame_index += length",
           "    dataset.next_frame_index += 0", "episodes get consecutive global frame ranges", T_EXPORT),
    Mutant("export-row-count-unchecked", EXPORT, "            if result.rows != episode.length:",
           "            if False:", "a shard whose rows differ from its allocation fails the export", T_EXPORT),
    Mutant("live-lease-ignored", LEASES, "    if left := seconds_left(job, now):", "    if False:",
           "a live lease of another attempt makes the task wait", ("tests/portal/core/test_leases.py",
                                                                   "tests/portal/recordings/test_history.py",
                                                                   *T_EXPORT)),
    Mutant("export-until-export-not-purged", EXPORT,
           "    if recording.audio == Recording.Audio.ENCRYPTED and recording.study.audio_policy == "
           "Study.AudioPolicy.UNTIL_EXPORT:", "    if False:", "until-export audio is purged after the export",
           T_AUDIO),
    # --- portal/recordings/services/verification.py and the receipt rules it applies (exporter/receipt.py) ---------
    Mutant("receipt-size-unchecked", RECEIPT, '        if size != artefact.get("bytes"):', "        if False:",
           "a stored object of the wrong length is named", (*T_VERIFY, "tests/exporter/test_verify.py")),
    Mutant("receipt-extra-objects-allowed", RECEIPT,
           'problems = [f"{name}: extra {noun} not in the receipt" for name in sorted(present - artefacts.keys())]',
           "problems = []", "an object not in the receipt is named", (*T_VERIFY, "tests/exporter/test_verify.py")),
    Mutant("verify-receipt-digest-unchecked", VERIFY,
           "    if receipt_sha is not None and receipt_sha != episode.receipt_sha256:", "    if False:",
           "a receipt rewritten to match altered objects is caught by its recorded digest", T_VERIFY),
    Mutant("verify-never-verified", VERIFY, "        elif recording.state == Recording.State.EXPORTED:",
           "        elif False:", "the first verification moves the recording to verified", T_VERIFY),
    # --- portal/recordings/services/ingest.py -------------------------------------------------------------------
    # Not "original = None" in _claim_digest: an equivalent mutant, the unique (study, digest) constraint then
    # finds the original (the same path a concurrent ingest takes).
    Mutant("ingest-duplicates-accepted", INGEST, "        if _claim_digest(actor, recording, source_digest(root)):",
           '        if _claim_digest(actor, recording, source_digest(root)[:-8] + f"{recording.pk:08x}"):',
           "the same source ingested twice is a duplicate", T_INGEST),
    Mutant("ingest-project-unchecked", INGEST,
           '    if claims.get("project_id") and study.project_id and claims["project_id"] != study.project_id:',
           "    if False:", "a source claiming another project is quarantined", T_INGEST),
    Mutant("ingest-closed-study-accepts", INGEST, "    if study.status != Study.Status.ACTIVE:", "    if False:",
           "a study that is not active accepts no recordings", T_INGEST),
    Mutant("ingest-release-consent-unchecked", INGEST, "        if not release.covered:", "        if False:",
           "a demonstrator without release consent is quarantined", T_INGEST),
    # The audio: the silent source is stored after the remux, so nothing is under source/ when it fails.
    Mutant("ingest-bad-media-audio-kept", INGEST,
           '            storage.delete_prefix(storage.captures(), recording.prefix + "audio/")\n', "",
           "a source rejected for its media leaves no sealed audio stored", T_INGEST),
    # --- portal/recordings/services/audio.py ----------------------------------------------------------------------
    Mutant("audio-quarantine-strips", AUDIO, "    return consent or quarantined", "    return consent",
           "a quarantined recording's audio is kept (encrypted) until the re-check", T_AUDIO + T_INGEST),
    Mutant("audio-key-kept-on-purge", AUDIO,
           "        deleted, _ = AudioKey.objects.filter(recording=recording).delete()",
           "        deleted = 0", "a purge destroys the recording's audio key", T_AUDIO),
    Mutant("audio-retention-flag-inverted", AUDIO, "audio_policy != Study.AudioPolicy.UNTIL_EXPORT)",
           "audio_policy == Study.AudioPolicy.UNTIL_EXPORT)",
           "raw_audio_retained is true only for retain and retain-days", T_AUDIO),
    Mutant("audio-retain-days-late", AUDIO, "recording.recorded_at + timedelta(days=days) <= now",
           "recording.recorded_at + timedelta(days=days) < now", "retain-days N purges when N days have passed",
           T_AUDIO),
    # --- the state machines (portal/core/states.py, recordings' history.py), headsets and inbox ------------------
    Mutant("states-move-not-audited", STATES,
           "        _record(actor, action, obj, before=before, after={**snapshot(obj), **(after or {})})\n", "",
           "every state change is an audit event", (*T_HISTORY, T_TRANSITIONS)),
    Mutant("states-transitions-unchecked", STATES, "        if not self.can_move_to(state):",
           "        if False:", "a move the transition table forbids is refused",
           (*T_HISTORY, "tests/portal/releases/test_release_requests.py")),
    Mutant("headset-assignment-unchecked", HEADSETS, "    if headset.assigned_on > on_date:", "    if False:",
           "the gate fails a recording made before its headset was the study's",
           ("tests/portal/studies/test_headsets.py", "tests/portal/releases/test_gate.py")),
    Mutant("inbox-young-entries-taken", INBOX, "now - entry.lstat().st_mtime < min_age_seconds",
           "now - entry.lstat().st_mtime < 0", "an entry younger than the minimum age waits for the next poll",
           T_INBOX),
    # --- portal/fixity/services/ (docs/fixity.md) -----------------------------------------------------------------
    Mutant("fixity-digest-unchecked", FIXITY,
           "        if (item.size is not None and size != item.size) or sha256 != item.sha256:", "        if False:",
           "a stored object whose bytes changed is reported", T_FIXITY),
    Mutant("fixity-study-folder-orphans-unreported", FIXITY,
           "            self.problem(study_id, Kind.ORPHAN, storage_name, name, why)", "            pass",
           "an object in a study's folder that no record accounts for is an orphan", T_FIXITY),
    Mutant("fixity-every-run-checks-everything", FIXITY,
           "        return self.count is None or slice_of(key, self.count) == self.run.slice_index",
           "        return True", "a cycle of scheduled runs checks every object exactly once", T_SLICING),
    Mutant("fixity-stopped-slice-skipped", FIXITY, 'studies="", finished_at__isnull=False, error="")',
           'studies="", finished_at__isnull=False)', "a run that stopped leaves its slice to the next run",
           T_SLICING),
    Mutant("fixity-repeats-realerted", ALERTS,
           "        problem.alert_id = reported.get((problem.storage, problem.object_name, problem.kind))",
           "        problem.alert_id = None", "a problem found again joins its unresolved alert, emailed once",
           T_FIXITY),
    Mutant("alert-note-optional", ALERTS, "    if not note:", "    if False:",
           "acknowledging and resolving an alert need a note", T_ALERTS),
    Mutant("alert-anyone-acts", ALERTS, "    if not has_role(actor, alert.study, *STEWARDS):", "    if False:",
           "only the study's coordinators and ethics officers acknowledge or resolve its alerts", T_ALERTS),
    Mutant("alert-banner-keeps-acknowledged", ALERTS, 'filter(study=OuterRef("study"), state=State.OPEN)',
           'filter(study=OuterRef("study"), state__in=Alert.UNRESOLVED)',
           "an acknowledged alert leaves the banner", T_ALERTS),
    Mutant("fixity-captures-not-checked", "portal/recordings/fixity.py", "@registry.source\ndef capture_units",
           "def capture_units", "the capture sources are checked against their records",
           ("tests/portal/fixity/test_captures_and_checkpoints.py",)),
    Mutant("fixity-checkpoints-not-checked", "portal/fixity/audit_checkpoints.py",
           "@registry.source\ndef checkpoint_units",
           "def checkpoint_units", "the audit checkpoints are checked against their notes",
           ("tests/portal/fixity/test_captures_and_checkpoints.py",)),
    Mutant("alert-receipt-repeat-emailed", ALERTS,
           "    repeat = Alert.objects.filter(episode=episode, state__in=Alert.UNRESOLVED).exists()",
           "    repeat = False", "a shard's repeated receipt mismatch is not emailed while unresolved", T_ALERTS),
]
