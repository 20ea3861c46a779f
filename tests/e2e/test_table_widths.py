"""No table is wider than its card at 1280 px: with long identifiers (capture IDs, usernames, file paths) every
column and button of a list stays in view instead of scrolling away inside the card."""

from __future__ import annotations

import pytest
from django_scopes import scope

from portal.research.services import links
from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request, agreement, make_released, make_researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.stored_objects, research.unique_code, research.worker, research.team, research.verified_factory,
    research.verified, research.make_request, research.agreement, research.make_released, research.make_researcher)

LONG_CAPTURE = "field-study-2026-partner-lab-b-kitchen-session-0042-take-0001-left-handed-demonstration-{}"
LONG_NAME = "researcher.with.a.rather.long.institutional.username.at.the.partner.laboratory"

# Cards whose content is wider than the card (it then scrolls inside it, hiding columns and buttons).
OVERFLOWING = """() => [...document.querySelectorAll("main .card")]
    .filter((card) => card.scrollWidth > card.clientWidth + 1)
    .map((card) => (card.id || (card.querySelector("h2, table") || card).id || card.textContent.trim().slice(0, 40))
         + ": " + card.scrollWidth + " > " + card.clientWidth)"""


@pytest.mark.django_db(transaction=True)
def test_list_pages_with_long_identifiers_fit_their_cards_at_1280_px(reg, verified, make_released, make_researcher,
                                                                      browser, live_server, shot):
    episodes = [verified(1, capture_id=LONG_CAPTURE.format(n))[0] for n in range(3)]
    released = make_released(episodes)
    verified(1, capture_id=LONG_CAPTURE.format("unrequested"))  # listed on the ask-for-a-release page
    researcher = make_researcher(LONG_NAME)
    with scope(study=reg.study):
        links.release_links(researcher, released, None, via="page")  # every file: the links lists fill up
    researcher.set_password("pw-" * 4)
    researcher.save()
    code = reg.study.code

    def visit(username: str, pages: list[str]) -> dict[str, list[str]]:
        context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", "pw-" * 4)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        found = {}
        for url in pages:
            page.goto(url)
            for details in page.locator("details").all():  # e.g. an episode's files, expanded
                details.evaluate("(node) => { node.open = true; }")
            found[url] = page.evaluate(OVERFLOWING)
            shot(page, "width-" + url.strip("/").replace("/", "-"))
        context.close()
        return found

    wide = visit(reg.coordinator.username, [
        f"/studies/{code}/recordings/", f"/studies/{code}/releases/new/", f"/studies/{code}/releases/",
        f"/studies/{code}/access/", f"/studies/{code}/access/links/"])
    wide |= visit(researcher.username, [
        f"/studies/{code}/released/{released.number}/", "/research/links/", f"/studies/{code}/released/"])
    assert {url: cards for url, cards in wide.items() if cards} == {}
