"""What every page's sidebar shows besides its chat list, loaded by the view that renders
the page (issue 36: templates get their data from the views, never query themselves)."""

from __future__ import annotations

from flask import g

from ..chat import projects as project_store


def sidebar_context() -> dict:
    """The template variables of the sidebar's project list, its search box's project
    filter and a chat's project menu: `sidebar_projects`, the signed-in user's projects with
    their chat counts (and fallback counts, for the chat settings' hint). Loaded once per
    request, however many of the page's parts ask."""
    if "sidebar_projects" not in g:
        counts = project_store.chat_counts(g.user.id)
        g.sidebar_projects = [
            {
                "id": p.id,
                "name": p.name,
                "chats": counts.get(p.id, 0),
                "fallbacks": len(p.settings.get("fallbacks") or []),
            }
            for p in project_store.list_projects(g.user.id)
        ]
    return {"sidebar_projects": g.sidebar_projects}
