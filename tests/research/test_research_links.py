"""A research run follows the links a page cites: the scripted provider through the real
OpenAI SDK, the real `fetch_page` against a local page server whose pages link to each
other. A page a search found queues the first links in its text the run has not seen
(never its menu), each read once, under the page budget and the address rules, and the
progress view says so; a page reached by a link queues none. On each backend."""

from __future__ import annotations

from numi.testing import Scenario

from research_support import answer, of_type, run_row

PLAN = "1. otters sleep\n2. otters rafts"


def follow_steps(events) -> list[str]:
    return [
        e["data"]["text"] for e in of_type(events, "research_step") if e["data"]["kind"] == "follow"
    ]


def test_a_page_found_by_a_search_adds_the_links_it_cites_and_each_is_read_once(
    research_app, research_chat, run_research, research_web, scripted
):
    web = research_web
    web.results["otters rafts"] = ["otters-3"]
    # Relative, absolute with a fragment, one already found by the search, a private
    # address, and a fourth beyond the three a page may add.
    web.links["otters-1"] = [
        "/page/lead-1",
        f"{web.url}/page/lead-2#section",
        "/page/otters-2",
        "http://10.255.255.1/secret",
        "/page/lead-4",
    ]
    web.links["lead-1"] = ["/page/deep-1"]  # a followed page adds nothing more
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Otters [1] [3]."))
    events = run_research(research_chat)
    assert dict(web.fetches) == {
        "otters-1": 1,
        "otters-2": 1,
        "lead-1": 1,
        "lead-2": 1,
        "otters-3": 1,
    }  # never the menu's link, lead-4 or deep-1
    [step] = follow_steps(events)
    assert step.startswith("Following 3 links cited by “Page otters-1 <b>bold</b>”")
    progress = of_type(events, "research_step")[-1]["data"]["progress"]
    assert any(line["kind"] == "follow" for line in progress["log"])
    by_page = {s["url"].rsplit("/", 1)[-1]: s for s in progress["sources"]}
    assert by_page["lead-1"]["status"] == by_page["lead-2"]["status"] == "read"
    assert by_page["lead-2"]["url"] == f"{web.url}/page/lead-2"  # no fragment: one page
    assert by_page["secret"]["status"] == "skipped" and "Refused" in by_page["secret"]["reason"]
    assert progress["pages_read"] == 5
    # The report's request carries the followed pages as numbered sources too.
    request = scripted.requests[-1].body["messages"][-1]["content"]
    assert "Facts about lead-1" in request and "Facts about lead-2" in request
    [report] = answer(research_app, research_chat)
    cited = [c["url"].rsplit("/", 1)[-1] for c in report.citation_sources]
    assert sorted(cited) == ["lead-1", "lead-2", "otters-1", "otters-2", "otters-3"]
    run, _ = run_row(research_app, research_chat)
    assert [lead["url"].rsplit("/", 1)[-1] for lead in run.state["leads"]] == [
        "lead-1",
        "lead-2",
        "secret",
    ]
    assert {lead["via"] for lead in run.state["leads"]} == {f"{web.url}/page/otters-1"}


def test_followed_links_stay_within_the_page_budget(
    research_app, research_chat, run_research, research_web, scripted
):
    research_web.links["otters-1"] = [f"/page/lead-{n}" for n in (1, 2, 3)]
    research_web.links["otters-2"] = [f"/page/lead-{n}" for n in (4, 5, 6)]
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Short [1]."))
    events = run_research(research_chat, research={"max_pages": 3})
    assert sum(research_web.fetches.values()) == 3
    progress = of_type(events, "research_step")[-1]["data"]["progress"]
    assert progress["pages_read"] == 3
    assert any(e["data"]["kind"] == "budget" for e in of_type(events, "research_step"))


def test_a_server_set_to_follow_no_links_reads_only_search_results(
    research_app, research_chat, run_research, research_web, scripted
):
    research_app.config["NUMI_RESEARCH_FOLLOW_LINKS"] = 0
    research_web.links["otters-1"] = ["/page/lead-1"]
    scripted.enqueue(Scenario().text(PLAN))
    scripted.enqueue(Scenario().text("Report [1]."))
    events = run_research(research_chat)
    assert dict(research_web.fetches) == {"otters-1": 1, "otters-2": 1}
    assert follow_steps(events) == []
