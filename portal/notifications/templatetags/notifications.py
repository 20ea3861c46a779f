from django import template

from portal.notifications.models import Kind
from portal.notifications.services import deliverable_email, mask, switched_off

register = template.Library()


@register.inclusion_tag("notifications/_email_switches.html", takes_context=True)
def email_switches(context):
    """The account page's card: each kind of message, with its email switch."""
    user = context["request"].user
    off = switched_off(user)
    address = deliverable_email(user)
    return {"kinds": [(value, label, value not in off) for value, label in Kind.choices],
            "address": mask(address) if address else "", "csrf_token": context.get("csrf_token")}
