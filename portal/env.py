"""Strict, typed readers for settings that come from the environment.

Every knob of the portal is read through these helpers, so a bad value stops start-up with a
message that names the variable and says what was expected, instead of surfacing later as an
obscure failure.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

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


def kept_secret(path: Path, make: Callable[[], str]) -> str:
    """The text kept in ``path``; made once with ``make()`` (mode 0600, its folder created) when the file does not
    exist yet. A machine without the variable (a dev machine) keeps its key across restarts this way."""
    path = Path(path)
    if not path.exists():
        # Staged, then linked into place: of processes starting at once (web, workers, test runners), the first
        # link wins and every process reads that one key; a link never shows a half-written file.
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        staged.touch(mode=0o600)
        try:
            staged.write_text(make())
            os.link(staged, path)
        except FileExistsError:
            pass
        finally:
            staged.unlink(missing_ok=True)
    return path.read_text().strip()


def env_key(name: str, *, size: int, kept_in: Path, what: str | None = None,
            environ: Mapping[str, str] | None = None) -> bytes:
    """A key of ``size`` bytes from ``name``, written as base64; without the variable, a random key made once in
    the file ``kept_in`` (``kept_secret``). ``what`` names the key in the refusal of a wrong length."""
    value = _raw(name, environ)
    if value is None:
        value = kept_secret(kept_in, lambda: base64.b64encode(secrets.token_bytes(size)).decode())
    try:
        key = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise ImproperlyConfigured(f"{name} is not valid base64") from None
    if len(key) != size:
        raise ImproperlyConfigured(f"{name} must be base64 of {what or f'{size} bytes'}, not {len(key)} bytes")
    return key
