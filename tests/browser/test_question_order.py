"""The first question sent from the home page stays above its answer, even when the chat's
page is drawn before the question is saved (a busy database) and the page starts following
the chat only after it was (a slow socket): the question then comes in the turn's snapshot,
and must still go above the answer, on the live page and after a reload.

The race is forced with real parts, not a hook in Numi: the module's server runs on
PostgreSQL, where the test holds a lock on the messages table that lets reads through (the
page renders) while the turn's save of the question waits; the browser's first socket is
held by the test (Playwright's WebSocket routing) until the question is saved, and the
scripted provider holds the answer until the page shows the question."""

from __future__ import annotations

import re

import psycopg
import pytest
from playwright.sync_api import expect

from numi.testing import Scenario
from page_support import LOOKS, pick_model
from server_wait import WAIT_SECONDS
from turn_support import Api, make_chat

pytestmark = pytest.mark.browser

QUESTION_ABOVE_ANSWER = """() => {
  const question = document.querySelector('#transcript .msg-user');
  const answer = document.querySelector('#transcript .msg-assistant[data-message-id]');
  return !!question && !!answer
    && !!(question.compareDocumentPosition(answer) & Node.DOCUMENT_POSITION_FOLLOWING);
}"""


@pytest.fixture(scope="module")
def site_env(postgres_module_url):
    return {"NUMI_DATABASE_URL": postgres_module_url}


@pytest.fixture
def messages_locked(postgres_module_url):
    """`hold()` takes a lock on the messages table that reads pass and writes wait for
    (an operator's long transaction); `release()` lets the waiting saves through."""
    connection = psycopg.connect(postgres_module_url.replace("postgresql+psycopg", "postgresql"))

    class Lock:
        def hold(self):
            connection.execute("LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE")

        def release(self):
            connection.commit()

    yield Lock()
    connection.rollback()
    connection.close()


class HeldSocket:
    """The page's first chat socket goes nowhere (Playwright answers it, open and silent);
    once `let_go()` closes it, the page's reconnect reaches the server."""

    def __init__(self, page):
        self.first = None
        page.route_web_socket(re.compile(r"/ws/(?!sidebar)[^/]+$"), self._route)

    def _route(self, socket):
        if self.first is None:
            self.first = socket
        else:
            socket.connect_to_server()

    def let_go(self):
        self.first.close(code=1011)


@pytest.mark.parametrize("size,scheme", LOOKS)
def test_a_question_saved_after_its_page_rendered_stays_above_its_answer(
    site, scripted, open_page_on, messages_locked, size, scheme, shot
):
    api = Api(site.url, token=site.token)
    make_chat(api, scripted, name=f"order-{size}")
    scripted.enqueue(Scenario().hold_headers().text("The answer, below its question."))
    page = open_page_on(site, size, scheme)
    socket = HeldSocket(page)
    pick_model(page, f"order-{size} fake-model")
    page.get_by_role("textbox", name="Message").fill("The question, on top")
    messages_locked.hold()
    page.get_by_role("textbox", name="Message").press("Enter")
    page.wait_for_url("**/c/*")
    page.wait_for_selector("#connection[data-state=open]", state="attached")
    assert page.locator("#transcript .msg-user").count() == 0  # drawn before it was saved
    messages_locked.release()
    scripted.wait_for_requests(1, timeout=WAIT_SECONDS)  # saved; its answer is held
    socket.let_go()
    expect(page.locator("#transcript .msg-user")).to_have_count(1)
    scripted.release()
    expect(page.locator("#transcript .msg-assistant[data-message-id]")).to_have_count(1)
    assert page.evaluate(QUESTION_ABOVE_ANSWER)
    shot(page, f"question-order-live-{size}")
    page.reload()
    page.locator("#transcript .msg-assistant[data-message-id]").wait_for()
    assert page.evaluate(QUESTION_ABOVE_ANSWER)
    assert page.errors == []
