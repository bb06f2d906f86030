"""A message's delete on the page offers Undo (issue 43): the toast's form brings the
messages back, within edits.RESTORE_SECONDS; later it restores nothing; bad ids change
nothing. (Another user's chat: test_transcript_isolation.)"""

from __future__ import annotations

import re
from datetime import timedelta

HTMX = {"HX-Request": "true"}


def test_undo_brings_a_deleted_message_back_until_it_is_too_late(
    multi_app, users, client_a, rows, live
):
    from numi.chat.edits import RESTORE_SECONDS
    from numi.extensions import db
    from numi.models import Message, utcnow

    chat_id, (question, answer) = rows(users["a"].id, [("user", "Q"), ("assistant", "A")])
    page = client_a.post(
        f"/c/{chat_id}/messages/{answer}/delete?scope=message", headers=HTMX
    ).get_data(as_text=True)
    assert "Message deleted." in page and 'hx-swap-oob="beforeend:#toasts"' in page
    form = re.search(r"<form[^>]*messages/restore.*?</form>", page, re.S).group(0)
    assert re.findall(r'name="ids" value="(\d+)"', form) == [str(answer)]
    assert [row[0] for row in live(chat_id)] == [question]

    assert client_a.post(f"/c/{chat_id}/messages/restore", data={"ids": ["x"]}).status_code == 400
    restored = client_a.post(
        f"/c/{chat_id}/messages/restore", data={"ids": [str(answer)], "toast": "t1"}, headers=HTMX
    )
    assert restored.status_code == 200
    assert '<div id="t1" hx-swap-oob="delete">' in restored.get_data(as_text=True)
    assert [row[0] for row in live(chat_id)] == [question, answer]

    # Deleted longer ago than the Undo lasts: nothing comes back.
    client_a.post(f"/c/{chat_id}/messages/{answer}/delete?scope=message", headers=HTMX)
    with multi_app.app_context():
        db.session.get(Message, answer).deleted_at = utcnow() - timedelta(
            seconds=RESTORE_SECONDS + 1
        )
        db.session.commit()
    client_a.post(f"/c/{chat_id}/messages/restore", data={"ids": [str(answer)]}, headers=HTMX)
    assert [row[0] for row in live(chat_id)] == [question]
