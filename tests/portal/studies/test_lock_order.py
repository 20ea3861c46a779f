"""A service that locks a parent row (a study, a demonstrator) and then records an audit event must not deadlock
with a job that recorded an event first and, at its commit, has PostgreSQL check a foreign key to that row (a
FOR KEY SHARE lock). Found by the kill drill: a release request being made (study row locked, then the audit
chain) against a worker committing an export (audit chain held, then the key check of its rows' study). Row
locks taken to serialise are FOR NO KEY UPDATE, which a key check never waits for."""

from __future__ import annotations

import threading
import time

from django.db import transaction

from portal.audit.models import AuditEvent
from portal.audit.services import record
from portal.studies.models import Headset
from portal.studies.services import study as study_services
from tests.portal.concurrency import needs_postgres, run_at_once

pytestmark = needs_postgres


def test_a_parent_row_lock_and_the_audit_chain_do_not_deadlock(study, coordinator):
    recorded, locked = threading.Event(), threading.Event()

    def job():
        with transaction.atomic():
            record(None, "test.job_step", study, study=study)  # holds the chain lock until it commits
            # A row whose foreign key to the study PostgreSQL checks at commit.
            Headset.objects.create(study=study, headset_id="HS-LOCK", registered_by=coordinator)
            recorded.set()
            assert locked.wait(10)
            time.sleep(0.5)  # the service now waits for the chain lock while holding the study row

    def service():
        assert recorded.wait(10)
        with transaction.atomic():
            study_services._locked(study)
            locked.set()
            record(None, "test.service_step", study, study=study)

    run_at_once(study, [job, service])
    assert AuditEvent.objects.filter(action__startswith="test.").count() == 2
