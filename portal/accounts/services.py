"""Accounts: API tokens, login lockouts and the second factor. Every change here is an audit event."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.access.models import Role
from portal.access.permissions import active_roles, has_role, roles_by_study
from portal.accounts.models import ApiToken, EnrolmentCode
from portal.audit.services import record
from portal.core.errors import ServiceError
from portal.studies.models import Study


class AccountError(ServiceError):
    """A request about an account that cannot be done; the message says why."""


# --- API tokens -------------------------------------------------------------------------------

# Writing last_used_at on every request would turn each API read into a write; minutes are enough.
_LAST_USED_RESOLUTION = timedelta(minutes=5)


def _hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _token_snapshot(token: ApiToken) -> dict:
    return {"name": token.name, "prefix": token.prefix, "user": token.user.get_username(),
            "study": token.study.code if token.study_id else None, "expires_at": token.expires_at,
            "second_factor": token.second_factor}


@transaction.atomic
def issue_token(user, *, name: str, study: Study | None = None, days: int | None = None,
                second_factor: bool = False) -> tuple[ApiToken, str]:
    """Make an API token for ``user``; return it and its key, which is never stored and cannot be shown again.

    ``days`` (default and maximum ``CERES_TOKEN_DAYS``) sets the expiry; ``study`` limits the token to one
    study in which the user holds a role. ``second_factor``: the session making it had passed the second
    factor; a token made without one is refused whenever its user needs a second factor (``token_for_key``).
    """
    name = (name or "").strip()
    if not name:
        raise AccountError("name the token (what it is for), so that you can tell it apart later")
    if len(name) > 100:
        raise AccountError(f"the token name has {len(name)} characters; at most 100")
    longest = settings.CERES_TOKEN_DAYS
    days = longest if days is None else days
    if not 1 <= days <= longest:
        raise AccountError(f"a token lasts 1 to {longest} days, not {days}")
    if study is not None and not active_roles(user, study):
        raise AccountError(f"you hold no role in study {study.code}; a token cannot open it")
    # Lock the owner's row so that two requests at once cannot both pass the count.
    get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk).first()
    held = ApiToken.objects.filter(user=user, expires_at__gt=timezone.now()).count()
    if held >= settings.CERES_TOKENS_PER_USER:
        raise AccountError(f"you already hold {held} unexpired tokens, the most allowed; revoke one first")
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:8], key_hash=_hash_key(key), study=study,
                                    expires_at=timezone.now() + timedelta(days=days), second_factor=second_factor)
    record(user, "accounts.token_created", token, after=_token_snapshot(token), study=study)
    return token, key


@transaction.atomic
def revoke_token(actor, token: ApiToken) -> None:
    """Delete a token: the owner revokes their own; a site administrator any."""
    if actor != token.user and not getattr(actor, "is_staff", False):
        raise AccountError("only the token's owner or a site administrator can revoke it")
    record(actor, "accounts.token_revoked", token, before=_token_snapshot(token), study=token.study)
    token.delete()


def made_after_second_factor(request) -> bool:
    """Whether the request's session has passed the second factor (what a token made from it records)."""
    is_verified = getattr(request.user, "is_verified", None)
    return bool(is_verified and is_verified())


def tokens_of(user) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user=user).select_related("study").order_by("-created_at"))


def token_for_key(key: str, *, at: datetime | None = None) -> ApiToken:
    """The live token with this key; AccountError if there is none, it expired, its user is inactive, or its user
    now needs a second factor and the token was not made with one (made before an ethics-officer grant, before
    ``CERES_REQUIRE_2FA`` was switched on, or before they enrolled)."""
    now = at or timezone.now()
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash_key(key)).first()
    if token is None or not token.user.is_active:
        raise AccountError("invalid token")
    if token.is_expired(now):
        raise AccountError(f"token {token.prefix}… expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; make a new one")
    if not token.second_factor and second_factor_required(token.user):
        raise AccountError(f"token {token.prefix}… was made without a second factor, which this account now needs: "
                           "sign in with your second factor (set it up if you have none) and make a new token")
    if token.last_used_at is None or token.last_used_at < now - _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


# --- login lockouts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Lockout:
    """A username or an address refused at login until ``until``."""

    kind: str  # "username" or "ip_address"
    value: str
    failures: int
    until: datetime


def current_lockouts(*, usernames: set[str] | None = None) -> list[Lockout]:
    """Usernames and addresses locked out now (only those ``usernames`` if given)."""
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    attempts = AccessAttempt.objects.filter(attempt_time__gte=since)
    found: list[Lockout] = []
    for kind in ("username", "ip_address"):
        if kind not in settings.AXES_LOCKOUT_PARAMETERS:
            continue
        rows = attempts.exclude(**{f"{kind}__isnull": True}).exclude(**{kind: ""})
        if kind == "username" and usernames is not None:
            rows = rows.filter(username__in=usernames)
        grouped = (rows.values(kind).annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
                   .filter(failures__gte=settings.AXES_FAILURE_LIMIT).order_by(kind))
        found += [Lockout(kind, row[kind], row["failures"], row["last"] + settings.AXES_COOLOFF_TIME)
                  for row in grouped]
    return found


@transaction.atomic
def unlock(actor, *, username: str | None = None, ip_address: str | None = None) -> int:
    """Clear the failed logins of a username or an address (a site administrator's act); return how many."""
    if bool(username) == bool(ip_address):
        raise AccountError("unlock either a username or an address")
    removed = AxesProxyHandler.reset_attempts(username=username, ip_address=ip_address)
    what = {"username": username} if username else {"ip_address": ip_address}
    target = _user_named(username) if username else None
    record(actor, "accounts.lockout_cleared", target, after={**what, "attempts_cleared": removed})
    return removed


def unlock_in_study(actor, study: Study, username: str) -> int:
    """A coordinator clears the lockout of an account that holds a role in their study.

    Site administrators' accounts are left to site administrators.
    """
    if not has_role(actor, study, Role.COORDINATOR):
        raise AccountError(f"only a coordinator of study {study.code} can unlock its members")
    user = _user_named(username)
    if user is None or not user.role_grants.filter(study=study).exists():
        raise AccountError(f"{username!r} holds no role in study {study.code}")
    if user.is_staff or user.is_superuser:
        raise AccountError(f"{username!r} is a site administrator; ask another site administrator to unlock it")
    return unlock(actor, username=username)


def _user_named(username: str | None):
    if not username:
        return None
    return get_user_model().objects.filter(username=username).first()


# --- second factor (TOTP) ---------------------------------------------------------------------


def second_factor_required(user) -> bool:
    """Whether ``user`` must pass a second factor at login: anyone who enrolled, and whom the rule requires."""
    if not user.is_authenticated:
        return False
    return confirmed_device(user) is not None or second_factor_required_by_rule(user)


def second_factor_required_by_rule(user) -> bool:
    """With ``CERES_REQUIRE_2FA`` on: site administrators and anyone holding an ethics-officer grant in any study.

    They are sent to enrolment at login if they have no authenticator yet.
    """
    if not settings.CERES_REQUIRE_2FA:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return any(Role.ETHICS_OFFICER in roles for roles in roles_by_study(user).values())


def confirmed_device(user) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).first()


# --- enrolment codes: who must have a second factor sets it up with a site administrator's code ---------------


class EnrolmentCodeNeeded(AccountError):
    """Enrolment of this user needs a site administrator's enrolment code first."""


def enrolment_code_required(user) -> bool:
    """With ``CERES_REQUIRE_2FA``: a user the rule requires a second factor of (an ethics officer, a site
    administrator) who has none sets it up only with an enrolment code, at first enrolment and after a reset.
    Their password alone would let whoever stole it enrol an authenticator of their own."""
    return second_factor_required_by_rule(user) and confirmed_device(user) is None


def _code_hash(code: str) -> str:
    return hashlib.sha256("".join(ch for ch in (code or "").upper() if ch.isalnum()).encode()).hexdigest()


def _actor_label(actor) -> str:
    return actor.get_username() if hasattr(actor, "get_username") else str(actor)


@transaction.atomic
def issue_enrolment_code(actor, user, *, hours: int | None = None) -> tuple[EnrolmentCode, str]:
    """A site administrator (a superuser, or ``manage.py issue_enrolment_code``: a string ``actor``) issues a one-time
    enrolment code for ``user``; return it and the code, which is never stored and cannot be shown again.

    The code expires after ``hours`` (default and most ``CERES_ENROLMENT_CODE_HOURS``); a new code replaces any
    unredeemed earlier one. Nobody issues their own.
    """
    if not isinstance(actor, str):
        if not getattr(actor, "is_superuser", False):
            raise AccountError("only a site administrator (superuser) issues enrolment codes")
        if actor.pk == user.pk:
            raise AccountError("you cannot issue an enrolment code for your own account; ask another site "
                               "administrator, or use manage.py issue_enrolment_code")
    if not user.is_active:
        raise AccountError(f"{user.get_username()} is not active")
    if confirmed_device(user) is not None:
        raise AccountError(f"{user.get_username()} already has a second factor; reset it first (TOTP devices)")
    longest = settings.CERES_ENROLMENT_CODE_HOURS
    hours = longest if hours is None else hours
    if not 1 <= hours <= longest:
        raise AccountError(f"an enrolment code lasts 1 to {longest} hours, not {hours}")
    now = timezone.now()
    EnrolmentCode.objects.filter(user=user, redeemed_at__isnull=True, expires_at__gt=now).update(expires_at=now)
    raw = base64.b32encode(secrets.token_bytes(10)).decode()  # 80 random bits, 16 characters
    code = "-".join(raw[i:i + 4] for i in range(0, 16, 4))
    row = EnrolmentCode.objects.create(user=user, code_hash=_code_hash(code), issued_by=_actor_label(actor),
                                       expires_at=now + timedelta(hours=hours))
    record(actor, "accounts.enrolment_code_issued", user, after={"expires_at": row.expires_at})
    return row, code


ENROLMENT_DEVICE = "ceres_enrolment_device"


def _redeemed_device(user, session) -> TOTPDevice | None:
    """The unconfirmed authenticator made by redeeming an unexpired enrolment code in this ``session``: the only one
    enrolment of a user who needs a code may show and confirm. Another session (whoever else holds the password,
    signed in meanwhile) sees none."""
    device_id = session.get(ENROLMENT_DEVICE) if session is not None else None
    if device_id is None:
        return None
    row = (EnrolmentCode.objects.filter(user=user, redeemed_at__isnull=False, device_id=device_id,
                                        expires_at__gt=timezone.now()).first())
    return TOTPDevice.objects.filter(pk=row.device_id, user=user, confirmed=False).first() if row else None


def awaiting_enrolment_code(user, session) -> bool:
    """Whether enrolment must ask this user, in this session, for an enrolment code before it shows a secret."""
    return enrolment_code_required(user) and _redeemed_device(user, session) is None


def redeem_enrolment_code(user, code: str, session, *, ip: str | None = None) -> TOTPDevice:
    """Use ``user``'s enrolment code: it is spent, and a new authenticator is made for enrolment to confirm, in this
    ``session`` only (its secret is shown there alone). Every use and refusal is an audit event. AccountError when
    refused."""
    if confirmed_device(user) is not None:
        raise AccountError("a second factor is already set up for this account")
    with transaction.atomic():
        row = EnrolmentCode.objects.select_for_update(no_key=True).filter(
            user=user, code_hash=_code_hash(code)).first()
        now = timezone.now()
        reason = ("wrong code" if row is None else "already used" if row.redeemed_at
                  else "expired" if row.expires_at <= now else None)
        if reason is None:
            TOTPDevice.objects.filter(user=user, confirmed=False).delete()
            device = TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=False)
            row.redeemed_at, row.device_id = now, device.pk
            row.save(update_fields=["redeemed_at", "device_id"])
            record(user, "accounts.enrolment_code_used", user, after={"ip": ip, "issued_by": row.issued_by})
            session[ENROLMENT_DEVICE] = device.pk
            return device
        record(user, "accounts.enrolment_code_refused", user, after={"ip": ip, "reason": reason})
    raise AccountError(f"that enrolment code is not valid for this account ({reason}); ask a site administrator "
                       "for a new one")


@transaction.atomic
def start_enrolment(user, session=None) -> TOTPDevice:
    """The user's unconfirmed authenticator (made once, kept until confirmed, so a reload shows the same secret).

    Of a user who needs an enrolment code: only the authenticator their code made when redeemed in this
    ``session`` (EnrolmentCodeNeeded until they redeem one).
    """
    if confirmed_device(user) is not None:
        raise AccountError("a second factor is already set up for this account")
    if enrolment_code_required(user):
        device = _redeemed_device(user, session)
        if device is None:
            raise EnrolmentCodeNeeded("your roles require a second factor: enter the enrolment code a site "
                                      "administrator gave you to set it up")
        return device
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    return device or TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=False)


@transaction.atomic
def confirm_enrolment(user, code: str, session=None, *, ip: str | None = None) -> TOTPDevice:
    """Confirm the user's new authenticator with a code from it; the caller then marks the session verified.

    A user who needs an enrolment code confirms only the authenticator their code made, redeemed in this
    ``session``."""
    device = TOTPDevice.objects.select_for_update(no_key=True).filter(user=user, confirmed=False).first()
    if enrolment_code_required(user):
        redeemed = _redeemed_device(user, session)
        if redeemed is None:
            raise EnrolmentCodeNeeded("your roles require a second factor: enter the enrolment code a site "
                                      "administrator gave you first")
        device = TOTPDevice.objects.select_for_update(no_key=True).get(pk=redeemed.pk)
    if device is None:
        raise AccountError("no authenticator is waiting to be confirmed; start again")
    if not device.verify_token(_clean_code(code)):
        raise AccountError("that code is not the current one; check the app's clock and try the next code")
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    if session is not None:
        session.pop(ENROLMENT_DEVICE, None)
    record(user, "accounts.second_factor_enrolled", user, after={"device": device.name, "ip": ip})
    return device


@transaction.atomic
def provision_second_factor(actor, user) -> TOTPDevice:
    """Set up a confirmed authenticator for ``user`` without a code (demo data; a secret handed over in person)."""
    if confirmed_device(user) is not None:
        raise AccountError(f"{user.get_username()} already has a second factor")
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    device = TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=True)
    record(actor, "accounts.second_factor_enrolled", user, after={"device": device.name, "provisioned": True})
    return device


def totp_secret(device: TOTPDevice) -> str:
    """The device's key as authenticator apps take it (base32)."""
    return base64.b32encode(device.bin_key).decode()


def check_second_factor(user, code: str, *, ip: str | None = None) -> TOTPDevice:
    """Check a login code; every pass and failure is an audit event. AccountError when refused.

    django-otp throttles a device after failures (the wait doubles with each), so codes cannot be guessed.
    """
    device = confirmed_device(user)
    if device is None:
        raise AccountError("this account has no second factor yet")
    allowed, _ = device.verify_is_allowed()
    with transaction.atomic():
        passed = allowed and device.verify_token(_clean_code(code))
        reason = None if passed else ("too many wrong codes; wait and try again" if not allowed
                                      else "wrong or expired code")
        record(user, "accounts.second_factor_passed" if passed else "accounts.second_factor_failed", user,
               after={"ip": ip, **({"reason": reason} if reason else {})})
    if not passed:
        raise AccountError(reason)
    return device


@transaction.atomic
def remove_second_factor(actor, user) -> None:
    """Remove the user's authenticators: the user, when no rule requires one; a site administrator (lost phone)."""
    administrator = getattr(actor, "is_staff", False)
    if actor != user and not administrator:
        raise AccountError("only the account's owner or a site administrator can remove its second factor")
    if not administrator and second_factor_required_by_rule(user):
        raise AccountError("your roles require a second factor; ask a site administrator to reset it")
    names = sorted(TOTPDevice.objects.filter(user=user).values_list("name", flat=True))
    if not names:
        raise AccountError(f"{user.get_username()} has no second factor to remove")
    TOTPDevice.objects.filter(user=user).delete()
    record(actor, "accounts.second_factor_removed", user, before={"devices": names})


SECOND_FACTOR_AT = "ceres_second_factor_at"


def note_second_factor_passed(session) -> None:
    """Remember in the session when it last passed the second factor (a release approval asks how fresh it is)."""
    session[SECOND_FACTOR_AT] = timezone.now().isoformat()


def second_factor_passed_at(session) -> datetime | None:
    value = session.get(SECOND_FACTOR_AT)
    return datetime.fromisoformat(value) if value else None


def _clean_code(code: str) -> str:
    return "".join((code or "").split())
