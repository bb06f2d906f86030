"""Share links: the JSON API, the chat menu's Share form, Settings → Shared links, and the
shared page itself (`/s/<token>`), public in every mode (security.PUBLIC_ENDPOINTS).

The shared page is its own small document (templates/shared.html): no sidebar, no
scripts, no live connection, no edit controls, and of the sharer only the display name
they chose. It is never indexed (`X-Robots-Tag` and a robots meta) and never tells
another site where its visitor came from (`Referrer-Policy: no-referrer`). A wrong,
revoked or expired token is the same bare 404; an address that keeps guessing is held
back (`ShareGuesses`). An answer's artifacts (HTML, SVG, Mermaid) preview on it as on the
chat page, in the artifact frame's sandbox: each is a lazy `<iframe sandbox="allow-scripts">`
on `/s/<token>/artifacts/<message>/<n>`, the frame document with the artifact inside, since
the shared page runs no script to post it there.
"""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, url_for

from ..chat import shares
from ..models import utcnow
from ..render import artifacts
from ..services import services
from .artifacts import FRAME_PERMISSIONS, MERMAID_FILE, frame_csp
from .auth import client_address
from .inputs import request_data
from .live.message_render import render_html
from .request_kind import is_htmx
from .pages.settings import settings_page

bp = Blueprint("shares", __name__)

PRIVATE_PAGE_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow, noarchive",
    # A snapshot may be revoked at any time: no shared cache keeps a copy.
    "Cache-Control": "private, no-store",
}


def _guesses() -> shares.ShareGuesses:
    throttle = services().login_throttle
    config = current_app.config
    return shares.ShareGuesses(
        throttle.store,
        throttle.clock,
        free=config["NUMI_SHARE_FREE_GUESSES"],
        delay=config["NUMI_LOGIN_DELAY_SECONDS"],
        max_delay=config["NUMI_LOGIN_MAX_DELAY_SECONDS"],
    )


def share_url(token: str) -> str:
    """The link as the sharer's browser reached Numi (behind a proxy, its public address
    when NUMI_TRUSTED_PROXIES lets ProxyFix read it)."""
    return url_for("shares.shared_page", token=token, _external=True)


@bp.post("/api/session/<chat_id>/share")
def create_share(chat_id: str):
    """Share the chat as it is now: 201 with the link (its token is shown only here)."""
    share, token = shares.create_share(g.user.id, chat_id, request_data())
    return jsonify(share=share.to_dict(utcnow()), url=share_url(token)), 201


@bp.get("/api/shares")
def list_shares():
    now = utcnow()
    return jsonify(shares=[s.to_dict(now) for s in shares.list_shares(g.user.id)])


@bp.delete("/api/shares/<int:share_id>")
def revoke_share(share_id: int):
    share = shares.revoke_share(g.user.id, share_id)
    return jsonify(share=share.to_dict(utcnow()))


@bp.post("/c/<chat_id>/share")
def share_form(chat_id: str):
    """The chat menu's Share form: the link with Copy, in place of the form's result."""
    share, token = shares.create_share(g.user.id, chat_id, request_data())
    template = "partials/_share_link.html" if is_htmx() else "share_created.html"
    return render_template(template, share=share, url=share_url(token), chat_id=chat_id)


@bp.post("/settings/shares/<int:share_id>/revoke")
def revoke_form(share_id: int):
    """Settings → Shared links: Revoke, answering the updated list (or the section)."""
    shares.revoke_share(g.user.id, share_id)
    if is_htmx():
        return render_template(
            "partials/_share_list.html", shares=shares.list_shares(g.user.id), now=utcnow()
        )
    return settings_page("shared-links")


def _open_or_none(token: str):
    """The open share of `token`, counting a wrong one against the client's address."""
    guesses = _guesses()
    address = client_address()
    guesses.check(address)
    share = shares.open_share(token)
    if share is None:
        guesses.wrong(address)
    return share


@bp.post("/s/<token>/continue")
def continue_shared(token: str):
    """ "Continue this chat": a copy into the signed-in visitor's own chats (this route is
    not public, so a visitor who is signed out is sent to sign in first)."""
    share = _open_or_none(token)
    if share is None:
        return "Not found\n", 404, {"Content-Type": "text/plain; charset=utf-8"}
    chat = shares.continue_share(g.user.id, share)
    return redirect(url_for("pages.chat_view", chat_id=chat.id), code=303)


@bp.get("/s/<token>")
def shared_page(token: str):
    share = _open_or_none(token)
    if share is None:
        return (
            "Not found\n",
            404,
            {"Content-Type": "text/plain; charset=utf-8", **PRIVATE_PAGE_HEADERS},
        )
    if share.audience == "signed_in" and g.get("user") is None:
        # Who may open it is no secret worth keeping from a holder of the link, and a
        # visitor needs to know that signing in opens it.
        page = render_template("shared.html", share=None, sign_in=True)
        return page, 403, PRIVATE_PAGE_HEADERS
    # The chat page's own render: the same sanitiser, markdown cap and CPU pool for long texts.
    page = render_template(
        "shared.html",
        share=share,
        sign_in=False,
        render=render_html,
        previews=_previews(share),
        token=token,
    )
    return page, 200, PRIVATE_PAGE_HEADERS


@bp.get("/s/<token>/artifacts/<int:index>/<int:n>")
def shared_artifact(token: str, index: int, n: int):
    """The artifact frame with the `n`th artifact of the snapshot's message `index` inside:
    the same document, policy and sandbox as the chat page's frame."""
    share = _open_or_none(token)
    found = (
        _previews(share).get(index, [])
        if share is not None and (share.audience == "anyone" or g.get("user") is not None)
        else []
    )
    if n >= len(found):
        return (
            "Not found\n",
            404,
            {"Content-Type": "text/plain; charset=utf-8", **PRIVATE_PAGE_HEADERS},
        )
    mermaid = url_for("static", filename=MERMAID_FILE, _external=True)
    embedded = {"kind": found[n].kind, "code": found[n].code}
    response = current_app.make_response(
        render_template("artifact_frame.html", mermaid=mermaid, embedded=embedded)
    )
    response.headers.update(PRIVATE_PAGE_HEADERS)
    response.headers["Content-Security-Policy"] = frame_csp(mermaid.split("?", 1)[0])
    response.headers["Permissions-Policy"] = FRAME_PERMISSIONS
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    return response


def _previews(share) -> dict[int, list]:
    """The previewable artifacts of each answer of the snapshot, by its place in it (a block
    too large to preview is left out, as the chat page refuses it)."""
    return {
        index: [a for a in artifacts(message["text"]) if not a.refused]
        for index, message in enumerate(share.snapshot)
        if message["role"] == "assistant"
    }
