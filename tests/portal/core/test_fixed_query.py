"""Queries compiled once per process (``core.fixed_query``) and what every request reads with them: the session,
the second factor's device and the navigation's grants read the same rows as the ORM's queries, and a change (a
revoked role, a signed-out session, a new alert) shows on the next request: nothing is kept across requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.access.models import RoleGrant
from portal.access.permissions import _NAVIGATION_COLUMNS, navigation, roles_by_study
from portal.accounts import services as accounts
from portal.core.fixed_query import FixedQuery
from portal.fixity.models import Alert
from portal.studies.models import Study

pytestmark = pytest.mark.django_db
SAMPLES = {"user_id": (1, 2), "now": (datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 2, 2, tzinfo=UTC))}


def _grants(user_id, now):
    return RoleGrant.objects.filter(user_id=user_id, granted_at__lt=now).order_by("pk").values_list("role", "study")


def test_the_compiled_query_reads_what_the_orm_reads(make_user, study, make_study):
    user = make_user("reader", study, ["coordinator", "ethics_officer"])
    make_user("other", study, ["coordinator"])
    fixed = FixedQuery(_grants, **SAMPLES)
    now = timezone.now()
    assert fixed.rows(user_id=user.pk, now=now) == list(_grants(user.pk, now))
    assert len(fixed.rows(user_id=user.pk, now=now)) == 2
    assert fixed.rows(user_id=user.pk, now=now - timedelta(days=1)) == []  # the time is a parameter too
    assert fixed.columns() == ["role", "study"]


def test_a_query_that_cannot_be_fixed_is_refused():
    changing = FixedQuery(lambda user_id, now: _grants(user_id, now)[:user_id], **SAMPLES)
    with pytest.raises(ImproperlyConfigured, match="SQL changes with user_id"):
        changing.rows(user_id=1, now=timezone.now())
    unused = FixedQuery(lambda user_id, now: RoleGrant.objects.filter(user_id=7).values_list("role"), **SAMPLES)
    with pytest.raises(ImproperlyConfigured, match="user_id is not a parameter"):
        unused.rows(user_id=1, now=timezone.now())
    with pytest.raises(ValueError, match="two different sample values"):
        FixedQuery(_grants, user_id=(1, 1), now=SAMPLES["now"])
    with pytest.raises(TypeError, match="give"):
        FixedQuery(_grants, **SAMPLES).rows(user_id=1)


def _request(user):
    request = RequestFactory().get("/")
    request.user = user
    return request


def test_the_navigation_is_roles_by_study_with_its_columns(make_user, study, make_study):
    beta = make_study("beta")
    user = make_user("nav", study, ["coordinator", "ethics_officer"])
    make_user("nav-beta", beta, ["researcher"])
    RoleGrant.objects.create(user=user, study=beta, role="researcher", expires_at=timezone.now() - timedelta(days=1))
    Alert.objects.create(study=study, kind=Alert.Kind.FIXITY, message="one orphan")
    columns = {name: expression() for name, expression in _NAVIGATION_COLUMNS.items()}
    expected = roles_by_study(user, **columns)
    nav = navigation(_request(user))
    assert nav == expected and list(nav.values()) == [["coordinator", "ethics_officer"]]  # the expired grant: no
    (read,) = nav
    assert isinstance(read, Study) and read.code == study.code and read.title == study.title
    assert read.open_alerts == 1 and read.unread_notifications == 0
    assert navigation(_request(make_user("nobody"))) == {}


def test_a_revoked_role_and_a_new_alert_show_on_the_next_request(client, make_user, study):
    user = make_user("revoked", study, ["coordinator"])
    client.force_login(user)
    page = reverse("recording-list", args=[study.code])
    assert client.get(page).status_code == 200
    Alert.objects.create(study=study, kind=Alert.Kind.FIXITY, message="one orphan")
    assert b"1 open integrity alert" in client.get(page).content
    RoleGrant.objects.filter(user=user).delete()
    assert client.get(page).status_code == 403


def test_a_signed_out_session_is_not_found_on_the_next_request(client, make_user, study):
    user = make_user("leaving", study, ["coordinator"])
    client.force_login(user)
    page = reverse("recording-list", args=[study.code])
    assert client.get(page).status_code == 200
    key = client.session.session_key
    client.post(reverse("logout"))
    client.cookies[settings.SESSION_COOKIE_NAME] = key  # the old cookie, sent again
    assert client.get(page).status_code == 302


def test_the_second_factor_check_sees_a_device_confirmed_since_the_last_request(make_user, study):
    user = make_user("enrolling", study, ["coordinator"])
    assert not accounts.second_factor_required(user)
    device = TOTPDevice.objects.create(user=user, name="phone", confirmed=False)
    assert not accounts.second_factor_required(user)
    device.confirmed = True
    device.save()
    assert accounts.second_factor_required(user)


def test_instances_are_the_orms_with_the_other_fields_deferred():
    from portal.audit import study_log
    from portal.audit.models import AuditCheckpoint, ChainVerification

    assert study_log.chain_status().verification is None and study_log.chain_status().checkpoint is None
    now = timezone.now()
    for hours, events in ((2, 10), (1, 20)):
        ChainVerification.objects.create(started_at=now - timedelta(hours=hours), finished_at=now, events=events,
                                         via=ChainVerification.Via.choices[0][0], ok=True)
        AuditCheckpoint.objects.create(seq=events, hash="a" * 64, event_count=events, name=f"cp-{events}",
                                       created_at=now - timedelta(hours=hours), key_fingerprint="b" * 64)
    status = study_log.chain_status()
    newest = ChainVerification.objects.order_by("-started_at", "-pk").first()
    assert status.verification == newest and status.verification.events == 20
    assert [getattr(status.verification, f.attname) for f in ChainVerification._meta.concrete_fields] == \
        [getattr(newest, f.attname) for f in ChainVerification._meta.concrete_fields]
    assert (status.checkpoint.seq, status.checkpoint.name) == (20, "cp-20")
    assert status.checkpoint.get_deferred_fields() == {"hash", "event_count", "keyed_from", "key_fingerprint",
                                                        "restart_reason"}
    misordered = FixedQuery(lambda: AuditCheckpoint.objects.values_list("seq", "id"))
    with pytest.raises(ImproperlyConfigured, match="not AuditCheckpoint's fields in order"):
        misordered.instances(AuditCheckpoint)
