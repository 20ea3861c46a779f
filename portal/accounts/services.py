"""Accounts: API tokens, login lockouts, the second factor and its recovery codes, the email address and the
password. Every change here is an audit event."""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import smtplib
from dataclasses import dataclass
from datetime import datetime, timedelta

from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.access.models import Role
from portal.access.permissions import active_roles, has_role, roles_by_study
from portal.accounts.models import ApiToken, EnrolmentCode
from portal.audit.services import record
from portal.core.errors import ServiceError
from portal.core.fixed_query import FixedQuery
from portal.studies.models import Study

logger = logging.getLogger(__name__)


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
    return _has_confirmed_device(user) or second_factor_required_by_rule(user)


def awaiting_second_factor(user) -> bool:
    """Signed in with the password, and a second factor still to pass: nothing but that page (and sign-out) opens,
    and the header shows nothing of the portal."""
    is_verified = getattr(user, "is_verified", None)
    if not user.is_authenticated or is_verified is None or is_verified():
        return False
    # Asked by the middleware and again by the header of the same request: the answer is kept on the user object.
    required = getattr(user, "_ceres_second_factor_required", None)
    if required is None:
        required = second_factor_required(user)
        user._ceres_second_factor_required = required
    return required


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


# Asked on every request of a session that has not passed a second factor (``awaiting_second_factor``): compiled
# once per process (``core.fixed_query``).
_CONFIRMED_DEVICE = FixedQuery(
    lambda user_id: TOTPDevice.objects.filter(user_id=user_id, confirmed=True).values_list("pk")[:1],
    user_id=(1, 2))


def _has_confirmed_device(user) -> bool:
    """``confirmed_device(user) is not None``, without the device."""
    return bool(_CONFIRMED_DEVICE.rows(user_id=user.pk))


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
    StaticDevice.objects.filter(user=user).delete()  # its recovery codes go with it
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


# --- recovery codes: sign in when the authenticator is lost -------------------------------------------------------
#
# django-otp's static device holds them, but each token row keeps only the first 16 hex digits of the SHA-256 of a
# code (80 random bits), never the code: a copy of the database does not sign anyone in. A session that passed with
# a recovery code is verified (it reaches the portal) but does not count as a fresh second factor for a release
# approval, which then asks for a code from the authenticator itself.

RECOVERY_DEVICE_NAME = "Recovery codes"


def _recovery_hash(code: str) -> str:
    return hashlib.sha256("".join(ch for ch in (code or "").upper() if ch.isalnum()).encode()).hexdigest()[:16]


def recovery_codes_left(user) -> int | None:
    """How many unused recovery codes the user holds (None: none were ever made, or they were removed)."""
    device = StaticDevice.objects.filter(user=user, name=RECOVERY_DEVICE_NAME).first()
    return None if device is None else device.token_set.count()


@transaction.atomic
def make_recovery_codes(user, *, ip: str | None = None) -> list[str]:
    """Make a new set of ``CERES_RECOVERY_CODES`` recovery codes for ``user`` (who has an authenticator), replacing
    any earlier set; return the codes, which are never stored and cannot be shown again."""
    if confirmed_device(user) is None:
        raise AccountError("set up an authenticator app first: recovery codes stand in for it when it is lost")
    StaticDevice.objects.filter(user=user).delete()
    device = StaticDevice.objects.create(user=user, name=RECOVERY_DEVICE_NAME, confirmed=True)
    codes = []
    for _ in range(settings.CERES_RECOVERY_CODES):
        raw = base64.b32encode(secrets.token_bytes(10)).decode()  # 80 random bits, 16 characters
        codes.append("-".join(raw[i:i + 4] for i in range(0, 16, 4)).lower())
    StaticToken.objects.bulk_create(StaticToken(device=device, token=_recovery_hash(code)) for code in codes)
    record(user, "accounts.recovery_codes_made", user, after={"count": len(codes), "ip": ip})
    return codes


def use_recovery_code(user, code: str, *, ip: str | None = None) -> StaticDevice:
    """Pass the second factor with a recovery code, which is spent; every use and refusal is an audit event.

    Wrong codes slow further tries down as wrong authenticator codes do (django-otp's throttle, doubling each
    time). AccountError when refused."""
    device = StaticDevice.objects.filter(user=user, name=RECOVERY_DEVICE_NAME).first()
    if device is None or confirmed_device(user) is None:
        raise AccountError("this account has no recovery codes; ask a site administrator to reset your second factor")
    with transaction.atomic():
        device = StaticDevice.objects.select_for_update(no_key=True).get(pk=device.pk)
        allowed, _ = device.verify_is_allowed()
        token = device.token_set.filter(token=_recovery_hash(code)).first() if allowed else None
        if token is not None:
            token.delete()
            device.throttle_reset(commit=True)
            left = device.token_set.count()
            record(user, "accounts.recovery_code_used", user, after={"ip": ip, "left": left})
            return device
        if allowed:
            device.throttle_increment(commit=True)
        reason = "wrong or already used recovery code" if allowed else "too many wrong codes; wait and try again"
        record(user, "accounts.recovery_code_refused", user, after={"ip": ip, "reason": reason})
    raise AccountError(reason)


# --- the email address: mail goes only to an address its owner confirmed ------------------------------------------

_EMAIL_SALT = "ceres.accounts.email-confirmation"


def confirmed_email(user) -> str | None:
    """The address mail to ``user`` may be sent to: one they confirmed by opening its link (or a site administrator
    set), None if there is none or the account is inactive."""
    address = (getattr(user, "email", "") or "").strip()
    return address if address and getattr(user, "is_active", False) else None


def mask_email(address: str | None) -> str:
    """The address as shown to others or written to the audit trail: ``a…@example.org``."""
    if not address:
        return ""
    local, _, domain = address.rpartition("@")
    if not local:
        return "…"
    return f"{local[0]}…@{domain}"


def pending_email(user) -> str | None:
    from portal.accounts.models import PendingEmail

    row = PendingEmail.objects.filter(user=user).first()
    return row.address if row else None


def _hour_bucket(kind: str, key: str) -> str:
    return f"ceres:throttle:{kind}:{hashlib.sha256(key.encode()).hexdigest()}:{timezone.now():%Y%m%d%H}"


def _spend(kind: str, key: str, limit: int) -> bool:
    """Count one more request of ``kind`` by ``key`` this hour; False once ``limit`` is passed."""
    bucket = _hour_bucket(kind, key)
    cache.add(bucket, 0, timeout=3700)
    try:
        count = cache.incr(bucket)
    except ValueError:  # expired between add and incr
        cache.set(bucket, 1, timeout=3700)
        count = 1
    return count <= limit


def request_email_change(user, address: str, *, confirm_url, ip: str | None = None) -> str:
    """Keep ``address`` as the user's unconfirmed address and mail it a signed confirmation link; return the link's
    token. ``confirm_url(token)`` makes the link's absolute URL. The confirmed address (if any) stays until then."""
    from portal.accounts.models import PendingEmail

    address = (address or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        raise AccountError(f"{address[:80]!r} is not an email address") from None
    local, _, domain = address.rpartition("@")
    address = f"{local}@{domain.lower()}"
    if address.lower() == (user.email or "").lower():
        raise AccountError(f"{address} is already your confirmed address")
    User = get_user_model()
    if User.objects.exclude(pk=user.pk).filter(email__iexact=address).exists():
        raise AccountError(f"{address} is the confirmed address of another account; use an address of your own")
    if not _spend("email-confirm", str(user.pk), settings.CERES_EMAIL_CONFIRMATIONS_PER_HOUR):
        raise AccountError(f"at most {settings.CERES_EMAIL_CONFIRMATIONS_PER_HOUR} confirmation links an hour; "
                           "try again later")
    with transaction.atomic():
        PendingEmail.objects.update_or_create(user=user, defaults={"address": address})
        token = signing.TimestampSigner(salt=_EMAIL_SALT).sign_object({"u": user.pk, "a": address})
        record(user, "accounts.email_change_requested", user, after={"address": mask_email(address), "ip": ip})
        hours = settings.CERES_EMAIL_CONFIRM_HOURS
        _send_or_refuse(
            "CERES Portal: confirm your email address",
            f"Someone (you, we hope) asked for {address} to receive the CERES Portal's mail for the account "
            f"{user.get_username()}.\n\nTo confirm, open this link while signed in as {user.get_username()} "
            f"(it works for {hours} hours):\n\n{confirm_url(token)}\n\n"
            "If you did not ask for this, ignore this message: nothing is sent to this address until it is confirmed.",
            address)
    return token


def _send_or_refuse(subject: str, body: str, address: str) -> None:
    """Send one message; a mail server that fails is an AccountError (the caller's transaction then keeps nothing)."""
    try:
        send_mail(subject, body, None, [address])
    except (OSError, smtplib.SMTPException) as exc:
        logger.warning("mail to %s failed: %s", mask_email(address), exc)
        raise AccountError("the mail server did not take the message; nothing was changed, try again later") from None


@transaction.atomic
def confirm_email(user, token: str, *, ip: str | None = None) -> str:
    """Open a confirmation link: the unconfirmed address it names becomes the user's ``email``. Only the user the
    link was made for, signed in, confirms it (an address typed wrongly does not hand their mail to a stranger who
    clicks); a link for an address replaced since, or used already, or older than ``CERES_EMAIL_CONFIRM_HOURS``
    is refused."""
    from portal.accounts.models import PendingEmail

    try:
        data = signing.TimestampSigner(salt=_EMAIL_SALT).unsign_object(
            token, max_age=timedelta(hours=settings.CERES_EMAIL_CONFIRM_HOURS))
    except signing.SignatureExpired:
        raise AccountError(f"this confirmation link is older than {settings.CERES_EMAIL_CONFIRM_HOURS} hours; "
                           "enter the address again on your account page for a new one") from None
    except signing.BadSignature:
        raise AccountError("this confirmation link is not valid (copy the whole link from the message)") from None
    if data.get("u") != user.pk:
        raise AccountError("this confirmation link was made for another account; sign in as the account that "
                           "asked for it")
    pending = PendingEmail.objects.select_for_update().filter(user=user).first()
    if pending is None or pending.address != data.get("a"):
        raise AccountError("this confirmation link was used already or its address was replaced since; "
                           "your account page shows the address in use")
    before = user.email or None
    user.email = pending.address
    user.save(update_fields=["email"])
    pending.delete()
    record(user, "accounts.email_confirmed", user,
           before={"address": mask_email(before)} if before else None,
           after={"address": mask_email(user.email), "ip": ip})
    return user.email


@transaction.atomic
def remove_email(user, *, ip: str | None = None) -> None:
    """Remove the user's confirmed and unconfirmed address: no mail is sent to them any more."""
    from portal.accounts.models import PendingEmail

    had = user.email
    PendingEmail.objects.filter(user=user).delete()
    if not had:
        raise AccountError("your account has no confirmed email address")
    user.email = ""
    user.save(update_fields=["email"])
    record(user, "accounts.email_removed", user, before={"address": mask_email(had)}, after={"ip": ip})


def set_confirmed_email(actor, user, address: str) -> None:
    """Give ``user`` a confirmed address without a link (demo data; a site administrator's act)."""
    validate_email(address)
    if user.email == address:
        return
    user.email = address
    user.save(update_fields=["email"])
    record(actor, "accounts.email_confirmed", user, after={"address": mask_email(address), "provisioned": True})


# --- password: change and reset, audited; a reset does not lift a lockout ------------------------------------------


def password_changed(user, *, ip: str | None = None, how: str) -> None:
    """After a password change (``how``: "changed" on the account page, "reset" by an emailed link): tell the user's
    confirmed address, so that a change they did not make does not go unnoticed. Every change of a password is an
    audit event already (``accounts.password_changed``, whatever the path); a reset adds ``accounts.password_reset``
    with the client's address, the reset link being the only proof of who set it."""
    if how == "reset":
        record(user, "accounts.password_reset", user, after={"ip": ip})
    address = confirmed_email(user)
    if address:
        try:  # the password is set whatever the mail server does; a failed notice is logged
            send_mail("CERES Portal: your password was changed",
                      f"The password of the CERES Portal account {user.get_username()} was "
                      f"{'reset by an emailed link' if how == 'reset' else 'changed on the account page'}. "
                      "If you did not do this, tell a site administrator now.", None, [address])
        except (OSError, smtplib.SMTPException) as exc:
            logger.warning("password-change notice to %s failed: %s", mask_email(address), exc)


def password_change_refused(user, request) -> None:
    """A wrong current password on the change form counts as a failed sign-in of the account (the lockout's rules):
    a session left open does not let anyone guess the password at leisure."""
    from django.contrib.auth.signals import user_login_failed

    user_login_failed.send(sender=__name__, credentials={"username": user.get_username()}, request=request)


def is_locked_out(request, username: str) -> bool:
    """Whether the lockout refuses ``username`` (or this client's address) now."""
    return AxesProxyHandler.is_locked(request, {"username": username})


def password_reset_allowed(address: str, ip: str | None) -> bool:
    """Count a reset request for ``address`` from ``ip``; False once either passed its hourly limit. Every request
    is an audit event (the address masked), allowed or not, whether or not an account has the address."""
    normalised = (address or "").strip().lower()
    by_address = _spend("reset-address", normalised, settings.CERES_PASSWORD_RESETS_PER_ADDRESS)
    by_client = _spend("reset-client", ip or "", settings.CERES_PASSWORD_RESETS_PER_CLIENT)
    allowed = by_address and by_client
    account = get_user_model().objects.filter(email__iexact=normalised, is_active=True).first() if normalised else None
    record("anonymous", "accounts.password_reset_requested", account,
           after={"address": mask_email(normalised), "ip": ip,
                  **({} if allowed else {"refused": "too many requests for this address" if not by_address
                                         else "too many requests from this client"})})
    return allowed
