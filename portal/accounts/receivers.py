"""Audit events for authentication and for every change of who can do what.

Signals are used because these changes happen in code the portal does not own (Django's login views,
its admin, ``createsuperuser``, django-axes): a receiver sees all of them, whatever the path.
Failed logins record the address and, for an existing account, the account; never a password, and
never an unknown username (people type passwords into the username field).
"""

from __future__ import annotations

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import m2m_changed, post_save, pre_delete, pre_save
from django.dispatch import receiver

from portal.accounts.middleware import current_actor
from portal.accounts.network import client_ip
from portal.audit.services import record

User = get_user_model()
# The fields of a user that decide what the account can do.
TRACKED_FIELDS = ("username", "is_active", "is_staff", "is_superuser")


def _ip(request) -> str | None:
    return client_ip(request) if request is not None else None


def _actor():
    return current_actor() or "system"


# --- sign-in ----------------------------------------------------------------------------------


@receiver(user_logged_in, dispatch_uid="audit-login")
def _logged_in(sender, request, user, **kwargs) -> None:
    record(user, "accounts.login", user, after={"ip": _ip(request)})


@receiver(user_logged_out, dispatch_uid="audit-logout")
def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        record(user, "accounts.logout", user, after={"ip": _ip(request)})


@receiver(user_login_failed, dispatch_uid="audit-login-failed")
def _login_failed(sender, credentials, request=None, **kwargs) -> None:
    username = credentials.get(User.USERNAME_FIELD) or credentials.get("username")
    account = User.objects.filter(**{User.USERNAME_FIELD: username}).first() if username else None
    # axes (whose receiver runs first) marks an attempt refused because of a running lockout: one whose
    # password was not even checked, so it was not counted either.
    locked = getattr(request, "axes_locked_out", False) and getattr(request, "axes_failures_since_start", None) is None
    after = {"ip": _ip(request), "reason": "locked out" if locked else "wrong credentials"}
    if account is None:
        after["account"] = "unknown"
    record("anonymous", "accounts.login_failed", account, after=after)


@receiver(user_locked_out, dispatch_uid="audit-locked-out")
def _locked_out(sender, request, username, ip_address, **kwargs) -> None:
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None:
        return  # an attempt during a running lockout: already recorded as a refused login
    account = User.objects.filter(**{User.USERNAME_FIELD: username}).first() if username else None
    after = {"ip": ip_address, "failures": failures, "minutes": settings.AXES_COOLOFF_TIME.total_seconds() // 60}
    if account is None:
        after["account"] = "unknown"
    record("anonymous", "accounts.locked_out", account, after=after)


# --- users, groups, permissions ---------------------------------------------------------------


@receiver(pre_save, sender=User, dispatch_uid="audit-user-before")
def _remember_user(sender, instance, update_fields=None, **kwargs) -> None:
    watched = {*TRACKED_FIELDS, "password"}
    if instance.pk is None or (update_fields is not None and not watched & set(update_fields)):
        return
    instance._audit_before = User.objects.filter(pk=instance.pk).values(*watched).first()


@receiver(post_save, sender=User, dispatch_uid="audit-user-after")
def _user_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created:
        record(_actor(), "accounts.user_created", instance,
               after={field: getattr(instance, field) for field in TRACKED_FIELDS})
        return
    before = instance.__dict__.pop("_audit_before", None)
    if before is None:
        return
    changed = [field for field in TRACKED_FIELDS if before[field] != getattr(instance, field)]
    if changed:
        record(_actor(), "accounts.user_changed", instance, before={field: before[field] for field in changed},
               after={field: getattr(instance, field) for field in changed})
    # Django re-hashes a password at login when the hasher's settings changed, saving with
    # update_fields=["password"]: the same password, not a change. Every form that sets one saves whole.
    rehash = update_fields is not None and set(update_fields) == {"password"}
    if before["password"] != instance.password and not rehash:
        record(_actor(), "accounts.password_changed", instance)


@receiver(pre_delete, sender=User, dispatch_uid="audit-user-deleted")
def _user_deleted(sender, instance, **kwargs) -> None:
    # Before the delete, so that the grants that go with the account are named in the event.
    grants = sorted(f"{grant.study.code}:{grant.role}" for grant in instance.role_grants.select_related("study"))
    record(_actor(), "accounts.user_deleted", instance,
           before={**{field: getattr(instance, field) for field in TRACKED_FIELDS}, "grants": grants})


def _names(model, pks) -> list[str]:
    if model is Group:
        return sorted(Group.objects.filter(pk__in=pks).values_list("name", flat=True))
    if model is User:
        return sorted(User.objects.filter(pk__in=pks).values_list(User.USERNAME_FIELD, flat=True))
    return sorted(f"{p.content_type.app_label}.{p.codename}"
                  for p in model.objects.filter(pk__in=pks).select_related("content_type"))


def _membership_changed(action: str, instance, model, pk_set, what: str, reverse_action: str | None = None) -> None:
    if action == "pre_clear":
        instance._audit_cleared = list(getattr(instance, what).values_list("pk", flat=True))
        return
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    pks = instance.__dict__.pop("_audit_cleared", []) if action == "post_clear" else pk_set
    if not pks:
        return
    key = "added" if action == "post_add" else "removed"
    record(_actor(), reverse_action or f"accounts.{what}_changed", instance, after={key: _names(model, pks)})


@receiver(m2m_changed, sender=User.groups.through, dispatch_uid="audit-user-groups")
def _groups_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    # reverse: users added to a group from the group's side (instance is the group).
    _membership_changed(action, instance, model, pk_set, "user_set" if reverse else "groups",
                        "accounts.group_members_changed" if reverse else None)


@receiver(m2m_changed, sender=User.user_permissions.through, dispatch_uid="audit-user-permissions")
def _permissions_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    _membership_changed(action, instance, model, pk_set, "user_set" if reverse else "user_permissions",
                        "accounts.permission_holders_changed" if reverse else None)


@receiver(m2m_changed, sender=Group.permissions.through, dispatch_uid="audit-group-permissions")
def _group_permissions_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    _membership_changed(action, instance, model, pk_set, "group_set" if reverse else "permissions",
                        "accounts.permission_groups_changed" if reverse else "accounts.group_permissions_changed")
