"""Signals of the study registry that later work hooks into."""

from django.dispatch import Signal

# Sent by ``services.withdraw_consent`` inside its transaction, with ``demonstrator`` and ``event``
# (the new withdrawn ConsentEvent). Receivers acting outside the database use ``transaction.on_commit``.
consent_withdrawn = Signal()
