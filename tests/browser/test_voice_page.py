"""Voice in real headless Chromium (desktop and phone): dictation with a fake microphone
(Chromium's --use-fake-device-for-media-stream) through the scripted provider's
/audio/transcriptions, Esc cancelling a recording, Read aloud through /audio/speech and,
without a voice endpoint, through the browser's speechSynthesis; and a browser that
refuses the microphone."""

from __future__ import annotations


import pytest

from numi.testing import Scenario
from page_support import LOOKS, SIZES
from fixtures.browser import CHROMIUM_ARGS, chromium_path
from turn_support import Api, make_chat
from server_wait import WAIT_SECONDS

pytestmark = pytest.mark.browser

FAKE_MICROPHONE = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]
# Records what the page asks the browser's voice to say, then lets it speak as usual.
SPOKEN = """
window.__spoken = [];
if (window.speechSynthesis) {
  const speak = speechSynthesis.speak.bind(speechSynthesis);
  speechSynthesis.speak = (utterance) => { window.__spoken.push(utterance.text); speak(utterance); };
}
"""


@pytest.fixture(scope="module")
def browsers(browser):
    """Two Chromiums with a fake microphone: one allows it (as a person clicking Allow),
    the other leaves the permission prompt unanswered, which refuses it."""
    path = chromium_path()
    with_mic = browser.browser_type.launch(
        executable_path=path, args=CHROMIUM_ARGS + FAKE_MICROPHONE
    )
    refusing = browser.browser_type.launch(
        executable_path=path, args=CHROMIUM_ARGS + FAKE_MICROPHONE[:1]
    )
    yield {"mic": with_mic, "refusing": refusing}
    with_mic.close()
    refusing.close()


@pytest.fixture
def open_chat(browsers, site, scripted):
    """`open_chat(size, scheme, voice=True, browser="mic")`: a chat with one answer, open
    in a fresh context; `voice` chooses the chat's scripted endpoint for voice (or none)."""
    contexts = []

    def opener(
        size, scheme, *, voice=True, browser="mic", answer="The answer to read.", touch=False
    ):
        api = Api(site.url, token=site.token)
        chat = make_chat(api, scripted, name="voice-chat")
        status, _ = api.call(
            "PATCH",
            "/api/preferences",
            {"voice": {"endpoint_id": chat["endpoint"]["id"] if voice else None}},
        )
        assert status == 200
        context = browsers[browser].new_context(
            viewport=SIZES[size],
            color_scheme=scheme,
            base_url=site.url,
            has_touch=touch,
            is_mobile=touch,
        )
        contexts.append(context)
        context.add_init_script(SPOKEN)
        page = context.new_page()
        page.set_default_timeout(WAIT_SECONDS * 1000)
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.goto(site.auth_url(f"/c/{chat['id']}"))
        scripted.enqueue(Scenario().text(answer))
        box = page.get_by_role("textbox", name="Message")
        box.fill("A question")
        if touch:  # on a touch screen Enter is a new line
            page.get_by_role("button", name="Send").tap()
        else:
            box.press("Enter")
        page.locator(".msg-assistant").get_by_text(answer).wait_for(timeout=WAIT_SECONDS * 1000)
        scripted.reset()
        return page

    yield opener
    for context in contexts:
        context.close()


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_dictation_puts_the_text_in_the_box_without_sending(
    open_chat, scripted, size, scheme, shot
):
    page = open_chat(size, scheme)
    box = page.get_by_role("textbox", name="Message")
    box.fill("Please")
    scripted.enqueue(Scenario().text("book a table for two."))
    page.get_by_role("button", name="Dictate").click()
    recorder = page.locator("#recorder")
    recorder.get_by_text("0:01").wait_for()  # the time runs
    page.wait_for_function(
        "() => parseInt(document.getElementById('recorder-level').style.width) > 0"
    )  # the fake microphone's tone moves the level
    shot(page, f"dictation-recording-{size}-{scheme}")
    from page_support import serious_violations

    assert serious_violations(page) == []
    page.get_by_role("button", name="Stop and transcribe").click()
    page.wait_for_function(
        "() => document.getElementById('composer-input').value === 'Please book a table for two.'"
    )
    assert recorder.is_hidden()
    sent = scripted.wait_for_requests(1).body
    assert sent["content_type"] == "audio/webm" and sent["size"] > 1000
    assert len(scripted.requests) == 1  # transcribed, not sent to the model
    assert page.locator(".msg-user").count() == 1
    shot(page, f"dictation-done-{size}-{scheme}")
    assert page.errors == []


def test_escape_cancels_a_recording(open_chat, scripted):
    page = open_chat("desktop", "light")
    page.get_by_role("button", name="Dictate").click()
    page.locator("#recorder").get_by_text("0:01").wait_for()
    page.keyboard.press("Escape")
    page.locator("#composer-feedback").get_by_text("Dictation cancelled.").wait_for()
    assert page.locator("#recorder").is_hidden()
    assert page.get_by_role("textbox", name="Message").input_value() == ""
    assert scripted.requests == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_tap_cancels_a_recording_on_a_phone(open_chat, scripted, shot, scheme):
    page = open_chat("phone", scheme, touch=True)
    page.get_by_role("button", name="Dictate").tap()
    page.locator("#recorder").get_by_text("0:01").wait_for()
    cancel = page.get_by_role("button", name="Cancel dictation")
    # In reach of a thumb: a full-size target inside the composer, in view.
    box = cancel.bounding_box()
    assert box["width"] >= 32 and box["height"] >= 32 and box["y"] + box["height"] <= 844
    shot(page, f"dictation-cancel-phone-{scheme}")
    from page_support import serious_violations

    assert serious_violations(page, "#composer") == []
    cancel.tap()
    page.locator("#composer-feedback").get_by_text("Dictation cancelled.").wait_for()
    assert page.locator("#recorder").is_hidden() and cancel.is_hidden()
    assert page.get_by_role("textbox", name="Message").input_value() == ""
    assert scripted.requests == []  # nothing was transcribed
    assert page.errors == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_read_aloud_plays_the_voice_endpoints_speech(open_chat, scripted, size, scheme, shot):
    page = open_chat(size, scheme)
    page.locator(".msg-assistant").get_by_role("button", name="Read aloud").click()
    page.locator(".msg-assistant").get_by_role("button", name="Stop reading").wait_for()
    assert scripted.wait_for_requests(1).body["input"] == "The answer to read."
    assert page.evaluate("window.__spoken") == []
    shot(page, f"read-aloud-{size}-{scheme}")
    assert page.errors == []


def test_read_aloud_without_a_voice_endpoint_uses_the_browsers_voice(open_chat, scripted):
    page = open_chat("phone", "dark", voice=False, answer="Spoken by the browser.")
    page.locator(".msg-assistant").get_by_role("button", name="Read aloud").click()
    page.wait_for_function("() => window.__spoken.length === 1")
    assert page.evaluate("window.__spoken") == ["Spoken by the browser."]
    assert scripted.requests == []
    assert page.errors == []


def test_a_refused_microphone_says_so(open_chat, scripted, shot):
    page = open_chat("desktop", "dark", browser="refusing")
    box = page.get_by_role("textbox", name="Message")
    box.fill("Kept text")
    page.get_by_role("button", name="Dictate").click()
    feedback = page.locator("#composer-feedback[data-code=microphone_refused]")
    feedback.wait_for()
    assert feedback.inner_text() == (
        "The browser refused the microphone. Allow it for this site to dictate."
    )
    assert page.locator("#recorder").is_hidden() and box.input_value() == "Kept text"
    shot(page, "microphone-refused")
    assert scripted.requests == []


def test_a_removed_voice_endpoint_is_reported_after_recording(open_chat, site, scripted):
    page = open_chat("desktop", "light")
    api = Api(site.url, token=site.token)
    endpoint = api.get("/api/preferences")[1]["voice"]["endpoint_id"]
    assert api.call("DELETE", f"/api/endpoints/{endpoint}")[0] == 200
    page.get_by_role("button", name="Dictate").click()
    page.locator("#recorder").get_by_text("0:01").wait_for()
    page.get_by_role("button", name="Stop and transcribe").click()
    page.locator("#composer-feedback[data-code=voice_endpoint_gone]").wait_for()
    assert scripted.requests == []


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_settings_voice_is_chosen_as_a_person_would(browsers, site, scripted, size, scheme, shot):
    from page_support import serious_violations

    api = Api(site.url, token=site.token)
    endpoint = make_chat(api, scripted, name="voice-settings")["endpoint"]
    context = browsers["mic"].new_context(
        viewport=SIZES[size], color_scheme=scheme, base_url=site.url
    )
    try:
        page = context.new_page()
        page.goto(site.auth_url("/settings/voice"))
        form = page.locator("#voice-settings")
        form.get_by_label("Voice endpoint").select_option(str(endpoint["id"]))
        form.get_by_label("Transcription model").fill("small.en")
        form.get_by_label("Voice", exact=True).fill("nova")
        form.get_by_role("button", name="Save").click()
        page.locator("#voice-settings").get_by_role("status").get_by_text("Saved.").wait_for()
        form.scroll_into_view_if_needed()
        shot(page, f"settings-voice-{size}-{scheme}")
        voice = api.get("/api/preferences")[1]["voice"]
        assert voice == {
            "endpoint_id": endpoint["id"],
            "stt_model": "small.en",
            "tts_model": "tts-1",
            "tts_voice": "nova",
        }
        assert serious_violations(page) == []
    finally:
        context.close()
