"""Strict, typed readers for settings that come from the environment.

Every knob of the portal is read through these helpers, so a bad value stops start-up with a
message that names the variable and says what was expected, instead of surfacing later as an
obscure failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    value = (os.environ if environ is None else environ).get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def env_str(name: str, default: str | None = None, *, required: bool = False,
            environ: Mapping[str, str] | None = None) -> str | None:
    value = _raw(name, environ)
    if value is None:
        if required:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None,
            environ: Mapping[str, str] | None = None) -> int:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = int(value, 10)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}")
    return number


def env_list(name: str, default: Iterable[str] = (), *, environ: Mapping[str, str] | None = None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty item; separate values with single commas")
    return items


def env_choice(name: str, default: str, choices: Iterable[str], *,
               environ: Mapping[str, str] | None = None) -> str:
    allowed = list(choices)
    value = _raw(name, environ)
    if value is None:
        return default
    if value not in allowed:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of: {', '.join(allowed)}")
    return value


def env_url(name: str, default: str | None = None, *, schemes: Iterable[str],
            environ: Mapping[str, str] | None = None) -> str | None:
    allowed = tuple(schemes)
    value = _raw(name, environ)
    if value is None:
        return default
    scheme = value.split(":", 1)[0].lower() if ":" in value else ""
    if scheme not in allowed:
        raise ImproperlyConfigured(
            f"{name} has scheme {scheme or '(none)'!r}; expected one of: {', '.join(allowed)}"
        )
    return value


_RATE_PERIODS = ("second", "minute", "hour", "day")


def env_rate(name: str, default: str, *, environ: Mapping[str, str] | None = None) -> str:
    """A request rate such as ``120/minute`` (the periods second, minute, hour, day)."""
    value = _raw(name, environ)
    if value is None:
        return default
    count, _, period = value.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate; write <count>/<{'|'.join(_RATE_PERIODS)}>, "
                                   "e.g. 120/minute")
    return value
