"""Fixity runs: re-hash the stored objects against the records that account for them, and list every folder under
the storages' roots for objects no record accounts for (orphans). See docs/fixity.md.

What is expected comes from the registry (``portal.fixity.registry``): each app declares the folders its records
own (units) and what must be in them. The store is cut into ``CERES_FIXITY_DAYS * CERES_FIXITY_RUNS_PER_DAY``
slices; each unit, each study's folder under a root (listed for orphans outside the units) and each object lying
directly in a root falls into one slice by a hash of its name, so consecutive runs, each checking the next slice,
cover every object exactly once per cycle. Every object is hashed streamed from storage (``storage.digest``).

A run takes a lease (one run at a time); a storage error that may pass (the gateway down) stops the run, which
is recorded with the error, and the same slice is checked again by the next run. Problems are recorded per study;
each study with new problems gets an alert (``alerts.fixity_alert``), emailed.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from portal.audit.services import record
from portal.core import leases, storage
from portal.fixity import registry
from portal.fixity.exceptions import FixityBusy
from portal.fixity.models import FixityProblem, FixityRun, FixityRunStudy
from portal.fixity.services import alerts
from portal.studies.models import Study

log = logging.getLogger(__name__)
Kind = FixityProblem.Kind
# A run's heartbeat: its lease (CERES_FIXITY_LEASE_SECONDS) renewed at most this often, between objects; a run
# whose lease has run out is taken for dead (its worker stopped) by the next one.
HEARTBEAT_SECONDS = 60
# Any fixed number: the key of the PostgreSQL advisory lock that serialises the start of runs.
_START_LOCK_KEY = 0x46495859


def slice_count() -> int:
    return settings.CERES_FIXITY_DAYS * settings.CERES_FIXITY_RUNS_PER_DAY


def slice_of(key: str, count: int) -> int:
    """The slice (0 to ``count`` - 1) of a unit, a study folder or an object, from its key: stable across runs,
    machines and Python versions, and spread evenly."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count


# --- starting and finishing ----------------------------------------------------------------------------------


def _lock_start() -> None:
    """Serialise the start of runs until the transaction ends (SQLite's write lock does it on the embedded
    default: transactions begin IMMEDIATE)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_START_LOCK_KEY])


def _take_lease(now) -> None:
    """Refuse while another run is alive; a run whose lease ran out is recorded as abandoned."""
    for running in FixityRun.objects.filter(finished_at__isnull=True).order_by("pk"):
        if leases.seconds_left(running, now):
            raise FixityBusy(f"fixity run {running.pk} ({running.scope_label}) is still running; its lease ends "
                             f"at {running.lease_until:%Y-%m-%d %H:%M:%S} UTC")
        running.finished_at, running.lease_until = now, None
        running.error = "abandoned: its worker stopped before it finished (the next run checks its slice again)"
        running.save(update_fields=["finished_at", "lease_until", "error"])
        record(None, "fixity.run_abandoned", running, after={"error": running.error})


def next_slice(count: int) -> int:
    """The slice after the last one a scheduled run of the whole store checked to its end (0 to begin with, or
    after the number of slices changed): a failed or abandoned run's slice is checked again."""
    last = (FixityRun.objects.filter(kind=FixityRun.Kind.SLICE, studies="", finished_at__isnull=False, error="")
            .order_by("-pk").only("slice_index", "slice_count").first())
    if last is None or last.slice_count != count:
        return 0
    return (last.slice_index + 1) % count


def _start(actor, *, kind: str, slice_index: int | None, count: int | None, studies: list[Study] | None,
           scheduled: bool) -> FixityRun:
    with transaction.atomic():
        _lock_start()
        now = timezone.now()
        _take_lease(now)
        if scheduled:
            slice_index = next_slice(count)
        run = FixityRun.objects.create(
            kind=kind, slice_index=slice_index, slice_count=count, started_at=now,
            studies=", ".join(sorted(study.code for study in studies)) if studies is not None else "",
            requested_by="schedule" if actor is None else getattr(actor, "get_username", lambda: str(actor))(),
            lease_until=leases.deadline(FixityRun, now))
        record(actor, "fixity.run_started", run, after={"scope": run.scope_label})
    return run


# --- the check -----------------------------------------------------------------------------------------------


@dataclass
class _Tally:
    objects_listed: int = 0
    objects_checked: int = 0
    bytes_checked: int = 0
    problems: list[FixityProblem] = field(default_factory=list)


class _Pass:
    """One run's work: the units of its slice compared with their records, the study folders of its slice listed
    for orphans, the objects lying directly in a root; tallied per study (None: no known study)."""

    def __init__(self, run: FixityRun, studies: list[Study] | None):
        self.run = run
        self.count = run.slice_count
        self.restricted = studies is not None
        with scopes_disabled():
            self.studies = {study.code: study for study in (studies if studies is not None
                                                            else Study.objects.only("pk", "code"))}
            self.units = registry.units(Study.objects.filter(pk__in=[s.pk for s in studies]) if studies is not None
                                        else None)
        self.by_id = {study.pk: study for study in self.studies.values()}
        self.prefixes: dict[str, list[str]] = {}
        for unit in self.units.values():
            self.prefixes.setdefault(unit.storage, []).append(unit.prefix)
        for names in self.prefixes.values():
            names.sort()
        self.tallies: dict[int | None, _Tally] = {}
        self.heartbeat = leases.Heartbeat(run, every=HEARTBEAT_SECONDS)

    def mine(self, key: str) -> bool:
        return self.count is None or slice_of(key, self.count) == self.run.slice_index

    def tally(self, study_id: int | None) -> _Tally:
        return self.tallies.setdefault(study_id, _Tally())

    def problem(self, study_id: int | None, kind: str, storage: str, name: str, detail: str) -> None:
        self.tally(study_id).problems.append(FixityProblem(run=self.run, study_id=study_id, kind=kind,
                                                           storage=storage, object_name=name, detail=detail))

    def nested(self, storage: str, prefix: str) -> list[str]:
        """The unit folders inside ``prefix`` (sorted: they follow it in the sorted list)."""
        names = self.prefixes.get(storage, [])
        found = []
        for name in names[bisect.bisect_right(names, prefix):]:
            if not name.startswith(prefix):
                break
            found.append(name)
        return found

    # -- walking

    @staticmethod
    def walk(store: Storage, prefix: str, skip: list[str]) -> Iterator[str]:
        """Every object under ``prefix``, not descending into the folders in ``skip`` (sorted). A folder with none of
        them inside is listed in one go (on S3 one paginated listing, not one request per folder below it)."""
        if not _holds(skip, prefix):
            yield from storage.walk(store, prefix)
            return
        try:
            folders, files = store.listdir(prefix.rstrip("/"))
        except FileNotFoundError:
            return
        for name in sorted(files):
            yield prefix + name
        for folder in sorted(folders):
            below = f"{prefix}{folder}/"
            index = bisect.bisect_left(skip, below)
            if index == len(skip) or skip[index] != below:
                yield from _Pass.walk(store, below, skip)

    # -- units

    def check_unit(self, unit: registry.Combined) -> None:
        store = storages[unit.storage]
        nested = self.nested(unit.storage, unit.prefix)
        present = set(self.walk(store, unit.prefix, nested))
        tally = self.tally(unit.study_id)
        tally.objects_listed += len(present)
        self.run.units_checked += 1
        if unit.absent:
            for name in sorted(present):
                self.problem(unit.study_id, Kind.ORPHAN, unit.storage, name,
                             f"{unit.label}: nothing may be here ({unit.absent})")
            return
        if unit.claimed:  # a job is writing it: listed, not checked
            return
        try:
            with scopes_disabled():
                recorded = unit.expected_objects()
        except (ValueError, KeyError, TypeError, ObjectDoesNotExist) as exc:
            # The record itself is damaged (a manifest kept in the database that no longer parses): reported, and
            # the run goes on, so one bad record never stops the schedule at its slice.
            self.problem(unit.study_id, Kind.UNREADABLE, unit.storage, unit.prefix,
                         f"the record of {unit.label} cannot be read: {exc!r}")
            return
        expected = {name: item for name, item in recorded.items()
                    if not any(name.startswith(inner) for inner in nested)}
        for name in sorted(expected.keys() - present):
            self.problem(unit.study_id, Kind.MISSING, unit.storage, name,
                         f"{expected[name][1]} records it; it is not in storage")
        for name in sorted(present - expected.keys()):
            self.problem(unit.study_id, Kind.ORPHAN, unit.storage, name,
                         f"in the folder of {unit.label}, which does not record it")
        for name in sorted(present & expected.keys()):
            self.check_object(store, unit, *expected[name], tally)
            self.heartbeat()

    def check_object(self, store: Storage, unit: registry.Combined, item: registry.Expected, record: str,
                     tally: _Tally) -> None:
        try:
            sha256, size = storage.digest(store, item.name)
        except FileNotFoundError:
            self.problem(unit.study_id, Kind.MISSING, unit.storage, item.name,
                         f"{record} records it; it was listed but could not be opened (deleted meanwhile?)")
            return
        except Exception as exc:
            if storage.is_transient(exc):
                raise  # the storage is away: the run stops, the next one checks this slice again
            self.problem(unit.study_id, Kind.UNREADABLE, unit.storage, item.name, f"cannot be read: {exc!r}")
            return
        tally.objects_checked += 1
        tally.bytes_checked += size
        expected_size = "" if item.size is None else f", {item.size} bytes"
        if (item.size is not None and size != item.size) or sha256 != item.sha256:
            self.problem(unit.study_id, Kind.CHANGED, unit.storage, item.name,
                         f"SHA-256 {sha256}, {size} bytes; {record} records SHA-256 {item.sha256}{expected_size}")

    # -- study folders and the roots

    def check_roots(self) -> None:
        for storage_name, root in registry.roots():
            store = storages[storage_name]
            try:
                folders, files = store.listdir(root.rstrip("/"))
            except FileNotFoundError:
                continue
            if not self.restricted:
                for name in sorted(files):
                    if self.mine(f"{storage_name}:{root}{name}"):
                        self.tally(None).objects_listed += 1
                        self.problem(None, Kind.ORPHAN, storage_name, root + name,
                                     "lies directly in the storage's folder for study folders; no record accounts "
                                     "for it")
            for folder in sorted(folders):
                if registry.is_other_part(storage_name, f"{root}{folder}/"):
                    continue
                study = self.studies.get(folder)
                if self.restricted and study is None:
                    continue
                prefix = f"{root}{folder}/"
                if self.mine(f"folder:{storage_name}:{prefix}"):
                    self.check_study_folder(store, storage_name, prefix, study)

    def check_study_folder(self, store: Storage, storage_name: str, prefix: str, study: Study | None) -> None:
        """Everything under a study's folder that lies outside every unit is an orphan."""
        study_id = study.pk if study is not None else None
        skip = self.prefixes.get(storage_name, [])
        why = (f"no record of study {study.code} accounts for it" if study is not None else
               f"no study has the code {prefix.rstrip('/').rsplit('/', 1)[-1]!r}; no record accounts for it")
        for name in self.walk(store, prefix, skip):
            self.tally(study_id).objects_listed += 1
            self.problem(study_id, Kind.ORPHAN, storage_name, name, why)
            self.heartbeat()

    def execute(self) -> None:
        for key in sorted(self.units):
            if self.mine(key):
                self.check_unit(self.units[key])
        self.check_roots()


def _holds(skip: list[str], prefix: str) -> bool:
    """Whether a folder of the sorted ``skip`` lies inside ``prefix`` (or is it)."""
    index = bisect.bisect_left(skip, prefix)
    return index < len(skip) and skip[index].startswith(prefix)


def _finish(actor, work: _Pass) -> FixityRun:
    run = work.run
    with transaction.atomic():
        run.finished_at, run.lease_until = timezone.now(), None
        run.objects_listed = sum(t.objects_listed for t in work.tallies.values())
        run.objects_checked = sum(t.objects_checked for t in work.tallies.values())
        run.bytes_checked = sum(t.bytes_checked for t in work.tallies.values())
        run.problem_count = sum(len(t.problems) for t in work.tallies.values())
        run.save()
        raised = []
        for study_id, tally in sorted(work.tallies.items(), key=lambda entry: (entry[0] is None, entry[0] or 0)):
            if study_id is None:
                continue
            study = work.by_id.get(study_id) or Study.objects.get(pk=study_id)
            with scope(study=study):
                FixityRunStudy.objects.create(study=study, run=run, objects_listed=tally.objects_listed,
                                              objects_checked=tally.objects_checked,
                                              bytes_checked=tally.bytes_checked, problem_count=len(tally.problems))
                if tally.problems:
                    alert = alerts.fixity_alert(study, run, tally.problems)
                    if alert is not None:
                        raised.append(alert.pk)
        with scopes_disabled():
            FixityProblem.objects.bulk_create([p for t in work.tallies.values() for p in t.problems],
                                              batch_size=1000)
        if outside := work.tallies.get(None, _Tally()).problems:  # no study's people to alert: the site's
            log.error("fixity run %s: %s problems outside every study (the fixity page lists them), first: %s %s: "
                      "%s", run.pk, len(outside), outside[0].kind, outside[0].object_name, outside[0].detail)
        record(actor, "fixity.run_finished", run, after={
            "scope": run.scope_label, "units": run.units_checked, "objects_listed": run.objects_listed,
            "objects_checked": run.objects_checked, "bytes_checked": run.bytes_checked,
            "problems": run.problem_count, "alerts": raised})
    return run


def _fail(actor, run: FixityRun, exc: BaseException) -> None:
    with transaction.atomic():
        FixityRun.objects.filter(pk=run.pk).update(finished_at=timezone.now(), lease_until=None,
                                                   units_checked=run.units_checked, error=f"stopped: {exc!r}")
        run.refresh_from_db()
        record(actor, "fixity.run_failed", run, after={"error": run.error})


def run_fixity(actor=None, *, full: bool = False, slice_index: int | None = None, count: int | None = None,
               studies: list[Study] | None = None) -> FixityRun:
    """One run, recorded: the next slice of the schedule (the default), slice ``slice_index`` of ``count``, or the
    whole store (``full``); limited to ``studies`` when given (then only their folders are listed). ``FixityBusy``
    while another run holds the lease. A storage error stops the run, recorded with the error, and is raised."""
    if full:
        kind, slice_index, count, scheduled = FixityRun.Kind.FULL, None, None, False
    else:
        count = count or slice_count()
        scheduled = slice_index is None
        if not scheduled and not 0 <= slice_index < count:
            raise ValueError(f"slice {slice_index} is not one of the {count} slices")
        kind = FixityRun.Kind.SLICE
    run = _start(actor, kind=kind, slice_index=slice_index, count=count, studies=studies, scheduled=scheduled)
    work = _Pass(run, studies)
    try:
        work.execute()
    except Exception as exc:
        _fail(actor, run, exc)
        raise
    run = _finish(actor, work)
    log.info("fixity run %s (%s): %s objects checked, %s listed, %s problems", run.pk, run.scope_label,
             run.objects_checked, run.objects_listed, run.problem_count)
    return run


def run_scheduled() -> FixityRun | None:
    """Beat's entry: the next slice, unless another run is still at work (then nothing: the next beat tries)."""
    try:
        return run_fixity()
    except FixityBusy as busy:
        log.info("fixity: no run this time: %s", busy)
        return None
