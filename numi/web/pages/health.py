"""The health check, public in every mode (security.PUBLIC_ENDPOINTS)."""

from __future__ import annotations

from .base import bp


@bp.get("/healthz")
def healthz():
    return {"ok": True}
