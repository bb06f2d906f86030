"""ChatContextService against a real database: budgets in whole turns, the omitted notice,
the context_budget error, checkpoints, and both cache invalidations."""

from __future__ import annotations

import pytest

from numi.chat.context import OMITTED_NOTICE, ChatContextService
from numi.errors import NumiError
from numi.extensions import db
from numi.models import Chat, Checkpoint

from context_support import add, make_chat, make_user, tool_call


@pytest.fixture
def ctx(app):
    with app.app_context():
        user_id = make_user()
        yield user_id


def service(chat_id, user_id, max_messages=200, max_chars=400_000):
    return ChatContextService(chat_id, user_id, max_messages=max_messages, max_chars=max_chars)


def roles(messages):
    return [m["role"] for m in messages]


def originals(messages):
    return [m for m in messages if not (m.get("_notice") or m.get("_checkpoint"))]


def test_everything_in_budget_is_sent_without_a_notice(ctx):
    chat = make_chat(ctx)
    for n in range(3):
        add(chat, "user", f"q{n}")
        add(chat, "assistant", f"a{n}")
    history = service(chat, ctx).history()
    assert [m["content"] for m in history.messages] == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert history.omitted == 0


def test_message_limit_keeps_whole_turns_and_adds_the_omitted_notice(ctx):
    chat = make_chat(ctx)
    for n in range(5):
        add(chat, "user", f"q{n}")
        add(chat, "assistant", f"a{n}")
    # 5 rows fit the limit; the oldest of them (a2) is half a turn, so the turn boundary
    # leaves exactly q3 a3 q4 a4.
    history = service(chat, ctx, max_messages=5).history()
    assert [m["content"] for m in originals(history.messages)] == ["q3", "a3", "q4", "a4"]
    assert history.messages[0]["content"] == OMITTED_NOTICE
    assert roles(history.messages[:2]) == ["user", "assistant"]
    assert history.omitted == 6  # q0..a2: exact, though only 5 rows were read


def test_char_limit_boundary_is_exact(ctx):
    chat = make_chat(ctx)
    add(chat, "user", "x" * 10)
    add(chat, "assistant", "y" * 10)
    add(chat, "user", "z" * 10)
    add(chat, "assistant", "w" * 10)
    exactly = service(chat, ctx, max_chars=40).history()
    assert len(exactly.messages) == 4 and exactly.omitted == 0
    one_less = service(chat, ctx, max_chars=39).history()
    assert [m["content"] for m in originals(one_less.messages)] == ["z" * 10, "w" * 10]
    assert one_less.omitted == 2
    assert one_less.messages[0]["content"] == OMITTED_NOTICE


def test_tool_calls_stay_with_their_results(ctx):
    chat = make_chat(ctx)
    add(chat, "user", "old question " + "o" * 100)
    add(chat, "assistant", "old answer")
    add(chat, "user", "use the tool")
    add(chat, "assistant", "", tool_calls=[tool_call("c1"), tool_call("c2")])
    add(chat, "tool", "r1", tool_call_id="c1")
    add(chat, "tool", "r2", tool_call_id="c2")
    add(chat, "assistant", "done")
    # Six rows fit the row limit but the oldest kept row would be "old answer" (no user
    # before it); the budget by rows cuts at 4 rows, which would orphan results.
    # A limit that cuts into the tool turn leaves it out whole (never a turn without its
    # question, never calls without their results); one that reaches its question keeps it.
    whole_tool_turn = ["user", "assistant", "tool", "tool", "assistant"]
    expected = {3: [], 4: [], 5: whole_tool_turn, 6: whole_tool_turn}
    for limit, wanted in expected.items():
        messages = originals(service(chat, ctx, max_messages=limit).history().messages)
        assert roles(messages) == wanted, limit
        call_ids = {c["id"] for m in messages for c in m.get("tool_calls", ())}
        result_ids = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert call_ids == result_ids, limit
    full = originals(service(chat, ctx, max_messages=5).history().messages)
    assert roles(full) == ["user", "assistant", "tool", "tool", "assistant"]
    # By characters too: the old turn does not fit, the whole tool turn does.
    by_chars = originals(service(chat, ctx, max_chars=60).history().messages)
    assert roles(by_chars) == ["user", "assistant", "tool", "tool", "assistant"]


def test_latest_turn_over_budget_is_a_context_budget_error(ctx):
    chat = make_chat(ctx)
    add(chat, "user", "short")
    add(chat, "assistant", "fine")
    add(chat, "user", "x" * 101)
    with pytest.raises(NumiError) as caught:
        service(chat, ctx, max_chars=100).history()
    assert caught.value.code == "context_budget"
    assert "Compact" in caught.value.message and "attachment" in caught.value.message


def test_error_placeholders_are_not_sent(ctx):
    chat = make_chat(ctx)
    add(chat, "user", "q")
    add(chat, "assistant", "", meta_json='{"error": {"code": "server_error"}, "partial": true}')
    add(chat, "user", "again")
    assert roles(service(chat, ctx).history().messages) == ["user", "user"]


def test_checkpoint_summary_then_later_messages(ctx):
    chat = make_chat(ctx)
    ids = [
        add(chat, "user", "q0"),
        add(chat, "assistant", "a0"),
        add(chat, "user", "q1"),
        add(chat, "assistant", "a1"),
    ]
    db.session.add(
        Checkpoint(chat_id=chat, summary="They talked about q0.", through_message_id=ids[1])
    )
    db.session.commit()
    history = service(chat, ctx).history()
    assert history.messages[0]["content"].endswith("They talked about q0.")
    assert history.messages[0]["role"] == "user" and history.messages[1]["role"] == "assistant"
    assert [m["content"] for m in history.messages[2:]] == ["q1", "a1"]
    assert history.checkpoint_id is not None
    # The transcript stays whole.
    from numi.models import Message

    assert db.session.query(Message).filter_by(chat_id=chat).count() == 4


def test_checkpoint_whose_boundary_was_deleted_is_ignored(ctx):
    from numi.models import Message, utcnow

    chat = make_chat(ctx)
    ids = [add(chat, "user", "q0"), add(chat, "assistant", "a0"), add(chat, "user", "q1")]
    db.session.add(Checkpoint(chat_id=chat, summary="stale", through_message_id=ids[1]))
    db.session.commit()
    db.session.get(Message, ids[1]).deleted_at = utcnow()
    db.session.commit()
    history = service(chat, ctx).history()
    assert history.checkpoint_id is None
    assert [m["content"] for m in history.messages] == ["q0", "q1"]


def test_a_saved_message_joins_the_loaded_history_and_a_checkpoint_reloads_it(ctx):
    chat = make_chat(ctx)
    add(chat, "user", "q0")
    svc = service(chat, ctx)
    first = svc.history()
    add(chat, "assistant", "written behind the service's back")
    assert svc.history() is first, "cached for the service's lifetime"
    saved = svc.save(role="user", content="q1")
    after_save = svc.history()
    assert after_save is not first
    # The turn's own save joins the rows it loaded (one load per turn): a row written
    # behind its back is read at the next load.
    assert [m["content"] for m in after_save.messages] == ["q0", "q1"]
    svc.save_checkpoint(summary="S", through_message_id=saved.id - 1)
    after_checkpoint = svc.history()
    assert after_checkpoint is not after_save
    assert after_checkpoint.messages[0]["content"].endswith("S")
    assert [m["content"] for m in after_checkpoint.messages[2:]] == ["q1"]


def _same_as_a_fresh_load(svc, chat, user_id, **limits):
    kept, fresh = svc.history(), service(chat, user_id, **limits).history()
    assert kept.messages == fresh.messages
    assert (kept.omitted, kept.checkpoint_id, kept.total_chars, kept.omitted_chars) == (
        fresh.omitted,
        fresh.checkpoint_id,
        fresh.total_chars,
        fresh.omitted_chars,
    )


@pytest.mark.parametrize(
    "limits, seeded, checkpoint",
    [
        ({"max_messages": 200, "max_chars": 400_000}, 2, False),
        ({"max_messages": 6, "max_chars": 400_000}, 2, False),  # the row limit starts cutting
        ({"max_messages": 6, "max_chars": 400_000}, 12, False),  # cut from the start
        ({"max_messages": 200, "max_chars": 260}, 2, False),  # the character budget
        ({"max_messages": 5, "max_chars": 400_000}, 8, True),
    ],
    ids=["in-budget", "row-limit-reached", "row-limit-from-start", "char-budget", "checkpoint"],
)
def test_a_turns_saves_give_the_history_a_fresh_load_gives(ctx, limits, seeded, checkpoint):
    """A tool loop's saves (calls, results, an error placeholder, a long answer) added to
    the loaded rows build the same history, notices and counts as reading them again."""
    chat = make_chat(ctx)
    for n in range(seeded // 2):
        add(chat, "user", f"q{n}")
        last = add(chat, "assistant", f"a{n}")
    if checkpoint:
        db.session.add(Checkpoint(chat_id=chat, summary="S", through_message_id=last - 2))
        db.session.commit()
    svc = service(chat, ctx, **limits)
    svc.save(role="user", content="question " + "q" * 40)
    _same_as_a_fresh_load(svc, chat, ctx, **limits)
    steps = [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1"), tool_call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 50},
        {"role": "tool", "tool_call_id": "c2", "content": "r" * 50},
        {"role": "assistant", "content": "", "reasoning_content": "thinking"},
        {"role": "assistant", "content": ""},  # failed before any output: never sent
        {"role": "assistant", "content": "answer " + "a" * 90, "meta": {"model": "m"}},
        {"role": "user", "content": "again"},
        {"role": "tool", "tool_call_id": "orphan", "content": "no call"},
    ]
    for fields in steps:
        svc.save(**fields)
        _same_as_a_fresh_load(svc, chat, ctx, **limits)


def test_changing_settings_invalidates_the_metadata_cache(ctx):
    chat_id = make_chat(ctx, system_prompt="one")
    svc = service(chat_id, ctx)
    assert svc.meta().settings == {"system_prompt": "one"}
    chat = db.session.get(Chat, chat_id)
    chat.settings = {"system_prompt": "two"}
    db.session.commit()
    assert svc.meta().settings == {"system_prompt": "one"}, "cached until refreshed"
    svc.refresh_meta()
    assert svc.meta().settings == {"system_prompt": "two"}
