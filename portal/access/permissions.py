"""The one permission helper: every view, API endpoint and task asks here.

A permission is always per study. Site administrators (staff) manage accounts through the admin;
they get no study data from role checks unless they also hold a grant.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django_scopes import scope
from rest_framework import exceptions
from rest_framework.permissions import BasePermission

from portal.access.models import Role, RoleGrant
from portal.core.fixed_query import FixedQuery
from portal.studies.models import Study


def _active_grants(user, at: datetime | None = None) -> QuerySet[RoleGrant]:
    now = at or timezone.now()
    return RoleGrant.objects.filter(user=user).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def active_roles(user, study: Study, *, at: datetime | None = None) -> frozenset[str]:
    if user is None or not user.is_authenticated or not user.is_active:
        return frozenset()
    return frozenset(_active_grants(user, at).filter(study=study).values_list("role", flat=True))


def has_role(user, study: Study, *roles: str) -> bool:
    held = active_roles(user, study)
    return bool(held & set(roles)) if roles else bool(held)


class RoleRequired(PermissionDenied):
    """A study page or endpoint needs one of ``roles`` (any role when empty), which the user does not hold."""

    def __init__(self, study: Study, roles: tuple[str, ...], held: frozenset[str]):
        self.study, self.roles, self.held = study, roles, held
        self.role_labels = [label for value, label in Role.choices if value in roles]
        needed = f"the role {' or '.join(self.role_labels)}" if roles else "a role"
        super().__init__(f"This page needs {needed} in study {study.code}.")


def require_role(user, study: Study, *roles: str) -> frozenset[str]:
    """Return the user's active roles in the study; raise RoleRequired unless one is in ``roles``."""
    held = active_roles(user, study)
    if not (held & set(roles) if roles else held):
        raise RoleRequired(study, roles, held)
    return held


def studies_for(user) -> QuerySet[Study]:
    """Studies in which the user holds at least one active grant."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(pk__in=_active_grants(user).values("study")).distinct()


def _token_study_id(request) -> int | None:
    """The study the request's API token is limited to, or None. ``request.auth`` is the ``ApiToken`` of a token
    request (``accounts.authentication``: access, below accounts, reads its ``study_id`` without its model) and
    None for a session."""
    return getattr(getattr(request, "auth", None), "study_id", None)


def token_allows(request, study: Study) -> bool:
    """An API token limited to one study opens that study only; sessions and unlimited tokens are not limited."""
    limited_to = _token_study_id(request)
    return limited_to is None or limited_to == study.pk


def api_studies_for(request) -> QuerySet[Study]:
    """The studies an API request may see: the user's, narrowed to its token's study if the token is limited."""
    studies = studies_for(request.user)
    limited_to = _token_study_id(request)
    return studies if limited_to is None else studies.filter(pk=limited_to)


def api_rows_for(request, rows: QuerySet, study_field: str = "study") -> QuerySet:
    """``rows`` narrowed to the request's token's study if the token is limited (for endpoints outside one study's
    URL that list the caller's own rows of every study, such as their access requests)."""
    limited_to = _token_study_id(request)
    return rows if limited_to is None else rows.filter(**{f"{study_field}_id": limited_to})


def roles_by_study(user, **annotations) -> dict[Study, list[str]]:
    """The user's active roles by study. ``annotations``: expressions over the grant rows about their study (each
    row has a ``study`` column), set as attributes of each Study: still one query."""
    grouped: dict[Study, list[str]] = {}
    if not user.is_authenticated:
        return grouped
    grants = _active_grants(user).select_related("study").order_by("study__code", "role")
    for grant in grants.annotate(**annotations) if annotations else grants:
        for name in annotations:
            setattr(grant.study, name, getattr(grant, name))
        grouped.setdefault(grant.study, []).append(grant.role)
    return grouped


# Columns the navigation's query adds about each study, by name: ``name -> () -> expression`` over the grant rows
# (each row has a ``study`` column). Apps above access add theirs when they load (fixity: the open alerts).
_NAVIGATION_COLUMNS: dict[str, Callable] = {}


def add_navigation_column(name: str, expression: Callable) -> None:
    """Have the navigation's query set ``name`` on each of its studies, read as ``expression()`` in the same query."""
    _NAVIGATION_COLUMNS[name] = expression
    _NAVIGATION.reset()


def _navigation_query(user_id: int, now: datetime) -> QuerySet:
    """``roles_by_study``'s query with the navigation's columns, as rows: the study's fields, the role, the columns."""
    columns = {name: expression() for name, expression in _NAVIGATION_COLUMNS.items()}
    grants = RoleGrant.objects.filter(user_id=user_id).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    return (grants.annotate(**columns).order_by("study__code", "role")
            .values_list(*(f"study__{field.attname}" for field in Study._meta.concrete_fields), "role", *columns))


# Its shape never changes: compiled once per process, run with the user and the time (``core.fixed_query``).
_NAVIGATION = FixedQuery(_navigation_query, user_id=(1, 2),
                         now=(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 2, 2, tzinfo=UTC)))


def navigation(request) -> dict[Study, list[str]]:
    """The studies and roles of the navigation bar: ``roles_by_study`` of the request's user with every column
    added by ``add_navigation_column``, read once per request (the header and the alert banner share it)."""
    nav = getattr(request, "_ceres_navigation", None)
    if nav is None:
        nav = request._ceres_navigation = _navigation(request.user)
    return nav


def _navigation(user) -> dict[Study, list[str]]:
    """``roles_by_study(user, **columns)`` from the query compiled once: the same studies, roles and columns."""
    grouped: dict[Study, list[str]] = {}
    if not user.is_authenticated:
        return grouped
    fields = [field.attname for field in Study._meta.concrete_fields]
    width, key = len(fields), fields.index(Study._meta.pk.attname)
    names = _NAVIGATION.columns()[width + 1:]  # after the study's fields and the role
    alias = _NAVIGATION.alias()
    studies: dict[int, Study] = {}
    for row in _NAVIGATION.rows(user_id=user.pk, now=timezone.now()):
        study = studies.get(row[key])
        if study is None:
            study = studies[row[key]] = Study.from_db(alias, fields, row[:width])
            for name, value in zip(names, row[width + 1:], strict=True):
                setattr(study, name, value)
            grouped[study] = []
        grouped[study].append(row[width])
    return grouped


def _study_and_roles(request, study_code: str, roles: tuple[str, ...]) -> tuple[Study, frozenset[str]]:
    """The study of a page and the viewer's active roles in it, read from the request's navigation (the header
    needs it anyway: one query for the study, the roles and the header); RoleRequired unless one is in ``roles``,
    404 for a study that does not exist."""
    user = request.user
    if user.is_active:
        for study, held_roles in navigation(request).items():
            if study.code == study_code:
                held = frozenset(held_roles)
                if not (held & set(roles) if roles else held):
                    raise RoleRequired(study, roles, held)
                return study, held
    # No active grant in that study (or no such study): the same answer require_role gives.
    study = get_object_or_404(Study, code=study_code)
    return study, require_role(user, study, *roles)


def study_view(*roles: str) -> Callable:
    """Decorate a view taking ``study_code``: login required, one of ``roles`` required, runs in the study scope.

    The view is called as ``view(request, study, **kwargs)`` and ``request.study_roles`` holds the roles.
    """

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, study_code: str, **kwargs) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            study, request.study_roles = _study_and_roles(request, study_code, roles)
            request.study = study
            with scope(study=study):
                return view(request, study, **kwargs)

        return wrapper

    return decorator


class StudyRolePermission(BasePermission):
    """DRF permission: the view's ``required_roles`` (a tuple, or a dict by action) in ``study_code``."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        study = get_object_or_404(Study, code=view.kwargs["study_code"])
        required = view.required_roles
        if isinstance(required, dict):
            required = required.get(getattr(view, "action", None) or request.method.lower(), required.get("*", ()))
        view.study = study
        try:
            if not token_allows(request, study):
                raise PermissionDenied(f"this API token is limited to another study than {study.code}")
            view.study_roles = require_role(request.user, study, *required)
        except PermissionDenied as denied:
            # DRF's own exception: the browsable API's renderer asks this class whether to show a form for
            # another method and expects an APIException when the answer is no.
            raise exceptions.PermissionDenied(str(denied)) from None
        return True


class StudyScopedAPIMixin:
    """Mixin for DRF views under ``/api/studies/<study_code>/``: checks roles and runs in the study scope."""

    permission_classes = [StudyRolePermission]
    required_roles: tuple[str, ...] | dict[str, tuple[str, ...]] = (Role.COORDINATOR,)

    def dispatch(self, request, *args, **kwargs):
        # The scope is entered before authentication; StudyRolePermission then refuses (404 or 403)
        # before any study data is read.
        study = Study.objects.filter(code=kwargs.get("study_code")).first()
        with scope(study=study):
            response = super().dispatch(request, *args, **kwargs)
            # Renderers read study data too (the browsable API's forms list related objects): render here,
            # inside the scope, rather than after the view has returned.
            if not getattr(response, "is_rendered", True):
                response.render()
            return response
