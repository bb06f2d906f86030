"""Fixtures for research runs: the local search and page server (`research_web`), an
in-process app whose user searches it (`research_app`), and `run_research`, which starts a
send in research mode and returns the turn's events once it has ended (no sleeps)."""

from __future__ import annotations

from typing import Iterator

import pytest

from fixtures.provider import add_scripted_endpoint
from research_support import ResearchWeb, drain, search_locally, wait_for

from numi.agent.send import Send
from numi.agent.sending import start_turn
from numi.extensions import db, turn_manager


@pytest.fixture(scope="session")
def research_web_server() -> Iterator[ResearchWeb]:
    web = ResearchWeb()
    yield web
    web.close()


@pytest.fixture
def research_web(research_web_server) -> Iterator[ResearchWeb]:
    research_web_server.reset()
    yield research_web_server
    research_web_server.release.set()


@pytest.fixture
def research_app(make_app, research_web):
    # Titles are model calls of their own: they would take the scripted answers.
    app = make_app(NUMI_GENERATE_TITLES=False, NUMI_PROVIDER_MAX_RETRIES=0)
    search_locally(app, research_web.url)
    return app


@pytest.fixture
def research_client(research_app):
    return research_app.test_client()


@pytest.fixture
def research_chat(research_client, scripted) -> str:
    endpoint_id = add_scripted_endpoint(research_client, scripted)
    response = research_client.post(
        "/api/session", json={"endpoint_id": endpoint_id, "model": "fake-model"}
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["id"]


@pytest.fixture
def run_research(research_app):
    """`run_research(chat_id, message, during=None, **payload)`: a research send; the
    turn's events after it ended. `during(events_so_far)` runs while it runs, once."""

    def run(chat_id: str, message: str = "How do otters sleep?", during=None, **payload):
        with research_app.app_context():
            subscription = turn_manager().subscribe(chat_id)[0]
            send = Send.from_payload(
                {"message": message, "mode": "research", **payload}, research_app.config
            )
            start_turn(1, True, chat_id, send)
            if during is not None:
                during(subscription)
            wait_for(lambda: not turn_manager().is_running(chat_id), "the run to end")
            events = drain(subscription)
            db.session.remove()
        return events

    return run
