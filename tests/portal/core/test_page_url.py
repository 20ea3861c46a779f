"""``{% page_url %}``: the layout's links reversed once per process, the text ``{% url %}`` writes."""

from __future__ import annotations

import pytest
from django.template import Context, Template


def test_page_url_writes_what_url_writes():
    cached = Template("{% load ceres %}{% page_url 'study-overview' code %}|{% page_url 'dashboard' %}|"
                      "{% page_url 'recording-list' code %}")
    plain = Template("{% url 'study-overview' code %}|{% url 'dashboard' %}|{% url 'recording-list' code %}")
    for code in ("alpha", "beta-2"):
        context = {"code": code}
        assert cached.render(Context(context)) == plain.render(Context(context))
        assert cached.render(Context(context)) == plain.render(Context(context))  # the second time: cached


def test_page_url_is_not_for_namespaced_names():
    with pytest.raises(ValueError, match="not for namespaced names"):
        Template("{% load ceres %}{% page_url 'admin:index' %}").render(Context({}))
