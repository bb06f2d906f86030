"""Routes for saved prompts: the Settings section (HTML forms, HTMX-enhanced) and the API.

POST /settings/prompts                  add (the section again, or its form with the error)
POST /settings/prompts/<id>             save an edit
POST /settings/prompts/<id>/delete      delete
GET  /api/prompts                       {prompts: [...]}
POST /api/prompts                       create -> 201 {prompt}
GET|PATCH|DELETE /api/prompts/<id>      one prompt (another user's id is a 404)
GET  /api/prompts/export                the `numi.prompts` file (Import reads it back)
"""

from __future__ import annotations

import json

from flask import Blueprint, g, jsonify, redirect, render_template, request, url_for

from .. import prompts as prompt_store
from ..errors import NumiError
from .inputs import request_data
from .pages.settings import settings_page
from .request_kind import is_htmx

bp = Blueprint("prompts", __name__)


def _section(status: int = 200, **context):
    """The Settings section (#prompts-section), with the user's prompts."""
    return render_template(
        "partials/_prompts_section.html", prompts=prompt_store.list_prompts(g.user.id), **context
    ), status


def _answer(change, *, editing: int | None = None, adding: bool = False):
    """Run `change()`; answer the section (HTMX) or go back to Settings. A refused change
    shows its message next to the form it came from, with what was typed kept."""
    try:
        change()
    except NumiError as exc:
        if exc.status == 404:
            raise
        form = {key: request.form.get(key, "") for key in prompt_store.FIELDS}
        error = {"code": exc.code, "message": exc.message, "form": form, "editing": editing}
        if is_htmx():
            return _section(exc.status, error=error)

        return settings_page("prompts", exc.status, prompt_error=error)
    if is_htmx():
        return _section(added=adding)  # after an add, the focus is back in an empty Add form
    return redirect(url_for("pages.settings", section="prompts"))


@bp.post("/settings/prompts")
def add():
    return _answer(lambda: prompt_store.create_prompt(g.user.id, request_data()), adding=True)


@bp.post("/settings/prompts/<int:prompt_id>")
def edit(prompt_id: int):
    prompt = prompt_store.get_prompt(g.user.id, prompt_id)
    return _answer(lambda: prompt_store.update_prompt(prompt, request_data()), editing=prompt.id)


@bp.post("/settings/prompts/<int:prompt_id>/delete")
def delete(prompt_id: int):
    prompt = prompt_store.get_prompt(g.user.id, prompt_id)
    return _answer(lambda: prompt_store.delete_prompt(prompt))


# --- JSON ---------------------------------------------------------------------------------


@bp.get("/api/prompts")
def list_json():
    return jsonify(prompts=[p.to_dict() for p in prompt_store.list_prompts(g.user.id)])


@bp.post("/api/prompts")
def create_json():
    prompt = prompt_store.create_prompt(g.user.id, request_data())
    return jsonify(prompt.to_dict()), 201


@bp.route("/api/prompts/<int:prompt_id>", methods=["GET", "PATCH", "DELETE"])
def one_json(prompt_id: int):
    prompt = prompt_store.get_prompt(g.user.id, prompt_id)
    if request.method == "PATCH":
        prompt_store.update_prompt(prompt, request_data())
    elif request.method == "DELETE":
        prompt_store.delete_prompt(prompt)
        return "", 204
    return jsonify(prompt.to_dict())


@bp.get("/api/prompts/export")
def export_json():
    body = json.dumps(prompt_store.export_document(g.user.id), ensure_ascii=False, indent=2)
    return (
        body,
        200,
        {
            "Content-Type": "application/json; charset=utf-8",
            "Content-Disposition": 'attachment; filename="numi-prompts.json"',
            "Cache-Control": "no-store",
        },
    )
