"""What the notifications app says about messages it sent: a withdrawal's notices as the stewards' page of the
withdrawal shows them. Each event's message is composed by the app whose event it is (``releases/notices.py``,
``research/notices.py``) and sent through ``services.notify``."""

from __future__ import annotations

from portal.notifications.models import Email, Notification


def withdrawal_told(withdrawal) -> list[tuple]:
    """For the stewards' page of a withdrawal: each notice with what became of it, as (notice, what). Says where
    it went (inbox, email delivered or not), never the message's text or the address."""
    messages = {n.recipient_id: n for n in Notification.objects.filter(key=f"withdrawal:{withdrawal.pk}")}
    told = []
    for notice in withdrawal.notices.select_related("user"):
        message = messages.get(notice.user_id)
        if notice.sent_at is None or message is None:
            what = "not told yet"
        elif message.email == Email.DELIVERED:
            what = f"in their inbox; email delivered {message.email_at:%Y-%m-%d %H:%M} UTC"
        elif message.email == Email.PENDING:
            what = "in their inbox; email not delivered yet"
        elif message.email == Email.FAILED:
            what = "in their inbox; the email failed: tell them another way if they do not sign in"
        else:
            what = f"in their inbox only ({message.get_email_display().lower()})"
        told.append((notice, what))
    return told
