"""The Library (`/library`): every document of the user with its project, size, indexing
state and errors, a search box over all of them (the same search as
`GET /api/documents/search`), and Re-index per document.

GET    /library?q=…            the page, with the ranked passages for `q` (works without script)
POST   /library/<id>/index     index one document again (words and vectors), in the background
POST   /library/<id>/delete    delete a document: its file, chunks, vectors and index rows
DELETE /api/documents/<id>     the same as JSON
GET    /c/<chat>/messages/<id>/sources/<n>   an answer's citation n opened at its passage: the
                               side panel's fragment for HTMX (static/js/passages.js), else a page
"""

from __future__ import annotations

import json

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for
from sqlalchemy import select

from ..chat import chats
from ..chat.attachments import get_attachment, human_size
from ..errors import NotFound, invalid
from ..extensions import db
from ..knowledge import embedding
from ..knowledge.index import delete_document, document_rows, schedule_indexing
from ..knowledge.passages import document_source, passage_view
from ..knowledge.retrieval import retrieve
from ..models import DocumentIndex, Message, Project, ProjectFile
from .request_kind import is_htmx

bp = Blueprint("library", __name__)


def _projects_of_documents(user_id: int) -> dict[int, str]:
    """The project each of the user's project files is in, by attachment id."""
    rows = db.session.execute(
        select(ProjectFile.attachment_id, Project.name)
        .join(Project, Project.id == ProjectFile.project_id)
        .where(ProjectFile.user_id == user_id, Project.user_id == user_id)
    ).all()
    return {attachment_id: name for attachment_id, name in rows}


@bp.get("/library")
def library_page():
    query = (request.args.get("q") or "").strip()
    if len(query) > 1000:
        raise invalid("The search is at most 1000 characters.", "invalid_documents_query")
    found = retrieve(g.user.id, query, limit=10) if query else None
    projects = _projects_of_documents(g.user.id)
    documents = [
        {**row, "project": projects.get(row["id"]), "size_text": human_size(row["size"])}
        for row in document_rows(g.user.id)
    ]
    return render_template(
        "library.html",
        query=query,
        found=found,
        documents=documents,
        documents_search=embedding.status_text(g.user),
    )


@bp.post("/library/<int:attachment_id>/index")
def reindex(attachment_id: int):
    attachment = get_attachment(g.user.id, attachment_id)  # another user's: 404
    state = db.session.get(DocumentIndex, attachment.id)
    if state is not None:
        state.status = "pending"  # the whole document again: its words, then its vectors
        db.session.commit()
    schedule_indexing(current_app._get_current_object(), attachment.id)
    return redirect(url_for("library.library_page"), code=303)


@bp.post("/library/<int:attachment_id>/delete")
def delete(attachment_id: int):
    delete_document(current_app._get_current_object(), g.user.id, attachment_id)
    if is_htmx():
        return ""  # the document's row goes from the table
    return redirect(url_for("library.library_page"), code=303)


@bp.delete("/api/documents/<int:attachment_id>")
def api_delete(attachment_id: int):
    delete_document(current_app._get_current_object(), g.user.id, attachment_id)
    return jsonify({"deleted": attachment_id})


@bp.get("/c/<chat_id>/messages/<int:message_id>/sources/<int:number>")
def answer_source(chat_id: str, message_id: int, number: int):
    """Citation `number` of one of the user's answers, opened at its passage."""
    chat = chats.get_chat(g.user.id, chat_id)  # another user's chat: 404
    sources = db.session.execute(
        select(Message.citation_sources_json).where(
            Message.id == message_id, Message.chat_id == chat.id, Message.role == "assistant"
        )
    ).scalar_one_or_none()
    if sources is None:
        raise NotFound("passage")
    source = document_source(json.loads(sources), number)
    passage = passage_view(g.user.id, source["attachment_id"], source["chunk"])
    template = "partials/_passage.html" if is_htmx() else "passage.html"
    return render_template(template, passage=passage, number=number, chat=chat)
