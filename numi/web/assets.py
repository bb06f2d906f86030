"""Static assets and response size: fingerprinted URLs cached for a year, compressed bodies.

`url_for('static', filename=...)` adds `v=<content hash>` to every static URL, so a
changed file gets a new URL: a static response asked for with the current hash is
`immutable` for a year, while pages (HTML) are `no-cache` and always revalidated. What
every page loads is served as a few bundles (numi.web.bundles), static files too.
Flask-Compress encodes HTML, JSON, CSS, JS and SVG with brotli or gzip; Server-Sent
Events (text/event-stream) and WebSockets are left alone, so they stream unbuffered.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

from flask import Flask, current_app, request
from flask_compress import Compress

from . import bundles

LONG_TERM = "public, max-age=31536000, immutable"
COMPRESSED_TYPES = [
    "text/html",
    "application/json",
    "application/manifest+json",
    "text/css",
    "text/javascript",
    "application/javascript",
    "image/svg+xml",
    "text/plain",
]


def init_app(app: Flask) -> None:
    app.config.setdefault("COMPRESS_MIMETYPES", COMPRESSED_TYPES)
    app.config.setdefault("COMPRESS_ALGORITHM", ["br", "gzip"])
    app.config.setdefault("COMPRESS_ALGORITHM_STREAMING", ["br", "gzip"])
    app.config.setdefault("COMPRESS_BR_LEVEL", 5)
    Compress(app)
    serve_file = app.view_functions["static"]

    def static(filename: str):
        version = static_version(filename) if filename in bundles.BUNDLES else None
        if version is None:
            return serve_file(filename=filename)  # a file, or a bundle missing a member: 404
        return bundles.response(filename, version)

    app.view_functions["static"] = static
    app.url_defaults(_fingerprint)
    app.after_request(_cache_headers)


def _fingerprint(endpoint: str, values: dict) -> None:
    if endpoint == "static" and "filename" in values and "v" not in values:
        version = static_version(values["filename"])
        if version:
            values["v"] = version


def static_version(filename: str) -> str | None:
    """The content hash of a static file or bundle (None if it does not exist)."""
    members = bundles.BUNDLES.get(filename)
    if members is not None:
        versions = [static_version(member) for member in members]
        return None if None in versions else bundles.version_of(versions)
    path = os.path.join(current_app.static_folder, filename)
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _hash(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _hash(path: str, _mtime_ns: int, _size: int) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()[:12]


def _cache_headers(response):
    if request.endpoint == "static":
        version = request.args.get("v")
        if (
            version
            and response.status_code in (200, 304)
            and version == static_version(request.view_args.get("filename", ""))
        ):
            response.headers["Cache-Control"] = LONG_TERM
    elif response.mimetype == "text/html" and "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-cache"
    return response
