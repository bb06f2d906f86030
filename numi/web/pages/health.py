"""The health check, public in every mode (security.PUBLIC_ENDPOINTS)."""

from __future__ import annotations

import logging

from flask import jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from ...extensions import db
from ...errors import storage_unavailable
from .base import bp

log = logging.getLogger(__name__)


@bp.get("/healthz")
def healthz():
    """200 `{ok: true}` while the database answers; 503 `storage_unavailable` when it does
    not, so a load balancer or supervisor sees the outage rather than a server error."""
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        db.session.rollback()
        log.warning("health check: the database does not answer (%s)", type(exc).__name__)
        error = storage_unavailable()
        return jsonify(ok=False, error=error.to_dict()), error.status
    finally:
        db.session.remove()
    return {"ok": True}
