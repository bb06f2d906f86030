"""The installable page: the web app manifest and the service worker, both at the root.

`GET /manifest.webmanifest` names the app and its icons (fingerprinted URLs). `GET /sw.js`
is `static/sw.js` with one line put before it: the app shell (every static file the
pages load, each URL carrying its content hash) and a version made from those URLs. A new
release changes a hash, so the worker's bytes change, the browser installs the new worker
beside the old one, and the page offers "Reload to update" (static/js/install.js).

Both are public: a browser fetches the manifest without cookies, and neither carries
anything of a user. Served from the root, the worker's scope is the whole site.
"""

from __future__ import annotations

import hashlib
import json
import os

from flask import Blueprint, Response, current_app, url_for

bp = Blueprint("installable", __name__)

# The manifest's colours follow the light theme; base.html's theme-color metas give the
# browser the dark one as well (a manifest has a single theme colour).
THEME_LIGHT = "#ffffff"
THEME_DARK = "#212121"
ICONS = (
    ("icons/numi-192.png", "192x192", "any"),
    ("icons/numi-512.png", "512x512", "any"),
    ("icons/numi-maskable-512.png", "512x512", "maskable"),
)
# Every static file a page may load, precached when the worker installs: those loaded on
# first use too (voice.js, artifacts.js, settings_overlay.js), so an offline page can still
# use them. Files
# loaded only by some pages are cached on their first use instead.
SHELL_FILES = (
    "bundle/shell.css",
    "bundle/htmx.js",
    "bundle/page.js",
    "bundle/chat.js",
    "js/voice.js",
    "js/artifacts.js",
    "js/settings_overlay.js",
    "js/prompts.js",
    "offline.html",
)


@bp.get("/manifest.webmanifest")
def manifest():
    body = {
        "id": "/",
        "name": "Numi",
        "short_name": "Numi",
        "description": "Chat with language models on your own machine.",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": THEME_LIGHT,
        "theme_color": THEME_LIGHT,
        "icons": [
            {
                "src": url_for("static", filename=name),
                "sizes": sizes,
                "type": "image/png",
                "purpose": purpose,
            }
            for name, sizes, purpose in ICONS
        ],
    }
    response = Response(json.dumps(body), mimetype="application/manifest+json")
    response.headers["Cache-Control"] = "no-cache"
    return response


def shell_urls() -> list[str]:
    """The fingerprinted URLs of the app shell, in a fixed order."""
    return [url_for("static", filename=name) for name in SHELL_FILES]


@bp.get("/sw.js")
def service_worker():
    urls = shell_urls()
    version = hashlib.sha256("\n".join(urls).encode()).hexdigest()[:12]
    shell = json.dumps({"version": version, "urls": urls})
    with open(os.path.join(current_app.static_folder, "sw.js"), encoding="utf-8") as file:
        code = file.read()
    response = Response(f"const SHELL = {shell};\n{code}", mimetype="text/javascript")
    # Always revalidated: the browser compares the bytes to find a new release.
    response.headers["Cache-Control"] = "no-cache"
    response.headers["Service-Worker-Allowed"] = "/"
    return response
