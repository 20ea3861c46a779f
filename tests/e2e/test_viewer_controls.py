"""The review viewer has the video's native controls, a playback speed and full screen, and at 1280 by 800 px clicking a
plot below the video seeks without hiding the video it seeks."""

from __future__ import annotations

import time

import pytest

from tests.portal.releases import conftest as releases

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request) = (
    releases.make_capture, releases.make_registry, releases.private_storage, releases.reg, releases.sent_tasks,
    releases.stored_objects, releases.unique_code, releases.worker, releases.team, releases.verified_factory,
    releases.verified, releases.make_request)


def until(page, function: str, what: str, timeout: float = 15) -> None:
    """Poll ``function`` (JavaScript) in the page: the Content-Security-Policy refuses Playwright's own
    wait_for_function, which evaluates a string."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if page.evaluate(function):
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


IN_VIEW = """() => { const r = document.getElementById("episode-video").getBoundingClientRect();
                     return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }"""


@pytest.mark.django_db(transaction=True)
def test_native_controls_speed_full_screen_and_plots_that_keep_the_video_in_view(team, verified, make_request,
                                                                                  browser, live_server, shot):
    episode = verified(1, seconds=6.0, width=160, height=120)[0]
    request = make_request([episode])
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", team.reg.ethics.username)
    page.fill("#id_password", "pw-" * 4)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    page.goto(f"/studies/{team.study.code}/releases/{request.number}/episodes/{episode.episode_index}/")
    page.locator("#viewer[data-ready='1']").wait_for()
    until(page, "() => document.getElementById('episode-video').readyState >= 1", "the video's metadata")

    assert page.eval_on_selector("#episode-video", "(video) => video.controls") is True
    # Annotations read as "key: value", not as raw JSON (the generated segments carry a note, assisted, difficulty).
    annotations = page.locator("#segments tbody tr td:last-child").all_inner_texts()
    assert annotations and all(text.startswith("note: ") and "{" not in text and '"' not in text
                               for text in annotations), annotations
    page.select_option("#speed", "2")
    assert page.eval_on_selector("#episode-video", "(video) => video.playbackRate") == 2

    # The tracking plot is the lowest: scrolled to and clicked, it seeks while the video stays in view.
    plot = page.locator("#tracking-plot .u-over")
    plot.scroll_into_view_if_needed()
    box = plot.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800
    before = page.get_attribute("#viewer", "data-frame")
    plot.click(position={"x": box["width"] * 0.75, "y": box["height"] / 2})
    until(page, f"() => document.getElementById('viewer').getAttribute('data-frame') !== '{before}'",
          "the click on the plot to seek")
    assert page.evaluate(IN_VIEW), "the video scrolled out of view when its plot was clicked"
    shot(page, "viewer-800px-plot-clicked")

    page.click("#fullscreen")
    until(page, "() => document.fullscreenElement && document.fullscreenElement.id === 'viewer'",
          "the viewer in full screen")
    until(page, "() => document.querySelector('#fullscreen').innerText.trim() === 'Leave full screen'",
          "the full-screen button's label to change")
    context.close()
