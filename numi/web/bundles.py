"""Bundles: what every page loads, served as a few static files rather than one per concern.

The sources stay as they are written and read: static/css by page family, static/js as
ES modules by concern, the vendored htmx as shipped; there is no build step. On a first
load each file cost a request, with about 1 KB of headers apiece (18 requests on the chat
page). A bundle is its members joined in order (less their comments), served by the static endpoint as
`bundle/<name>`: public, fingerprinted by its members' contents (numi.web.assets), cached
for a year like any static file, and compressed once per release with brotli at its best
quality (each member compressed alone at the serving quality was 10 % larger).

Modules are joined each in a block of its own, so a module's top-level `const`, `let` and
functions stay its own, as in separate files; static/js modules import and export nothing
(app.js says why), so a block holds the whole of one.
"""

from __future__ import annotations

import hashlib
import os
import re

import brotli
from flask import Response, current_app, request

from ..cpu_pool import run_cpu

# Name -> members, in the order a page runs them. Scripts that only some pages load, or
# load on first use, stay files of their own (prompts.js, voice.js, artifacts.js, settings.js).
BUNDLES: dict[str, tuple[str, ...]] = {
    "bundle/shell.css": (
        "css/tokens.css",
        "css/app.css",
        "css/messages.css",
        "css/code.css",
        "css/controls.css",
        "css/projects.css",
        "css/compare.css",
        "css/picker.css",
        "css/passages.css",
        "css/composer.css",
        "css/header.css",
        "css/sidebar.css",
    ),
    # Classic scripts, run deferred: htmx, then its WebSocket extension.
    "bundle/htmx.js": ("vendor/htmx-2.0.11.min.js", "vendor/htmx-ext-ws-2.0.4.min.js"),
    # Modules of every page: app.js first, since it makes `Numi`, which the others share.
    "bundle/page.js": (
        "js/app.js",
        "js/composer.js",
        "js/sidebar.js",
        "js/shortcuts.js",
        "js/projects.js",
        "js/install.js",
        "js/compare.js",
        "js/research.js",
        "js/picker.js",
    ),
    # Modules of the chat page only (its artifact panel's artifacts.js loads on the first
    # Preview, app.js).
    "bundle/chat.js": ("js/context_panel.js", "js/passages.js"),
}

MODULES = {"bundle/page.js", "bundle/chat.js"}
# Best quality: a bundle is compressed once per release, in the CPU pool (tens of ms).
BROTLI_QUALITY = 11

_CSS_COMMENT = re.compile(rb"/\*.*?\*/", re.S)
_BLANK_LINES = re.compile(rb"(?<=\n)[ \t]*\n")
# A script's whole-line comment. Only whole lines: a `//` after code may sit inside a string,
# and static/js has no template literal that spans lines (tests/web/test_assets.py checks).
_JS_LINE_COMMENT = re.compile(rb"(?m)^[ \t]*//[^\n]*\n")

# filename -> (version, joined bytes, brotli bytes); a changed member makes a new version.
_built: dict[str, tuple[str, bytes, bytes]] = {}


def version_of(member_versions: list[str]) -> str:
    """A bundle's fingerprint, from its members' (so it changes when any of them does)."""
    return hashlib.sha256(" ".join(member_versions).encode()).hexdigest()[:12]


def response(filename: str, version: str) -> Response:
    """The bundle `filename` at `version`, brotli-encoded when the client takes it."""
    joined, encoded = _build(filename, version)
    brotli_ok = "br" in request.accept_encodings
    body = encoded if brotli_ok else joined  # else Flask-Compress may gzip it (numi.web.assets)
    result = Response(body, mimetype="text/css" if filename.endswith(".css") else "text/javascript")
    if brotli_ok:
        result.headers["Content-Encoding"] = "br"
    result.vary.add("Accept-Encoding")
    result.set_etag(f"{version}-br" if brotli_ok else version)
    return result.make_conditional(request)


def _build(filename: str, version: str) -> tuple[bytes, bytes]:
    built = _built.get(filename)
    if built is None or built[0] != version:
        joined = _join(filename)
        # Off the hub: a best-quality compression of a large bundle takes tens of ms.
        encoded = run_cpu(brotli.compress, joined, quality=BROTLI_QUALITY)
        built = _built[filename] = (version, joined, encoded)
    return built[1], built[2]


def without_comments(stylesheet: bytes) -> bytes:
    """A stylesheet less its comments and blank lines. The comments say why for the reader
    of static/css, not for the page: a first load is about 5 KB lighter compressed without
    them (the first page's budget is 60 KB)."""
    return _BLANK_LINES.sub(b"", _CSS_COMMENT.sub(b"", stylesheet))


def without_line_comments(script: bytes) -> bytes:
    """A script less its whole-line comments and blank lines, for the same reason as
    `without_comments`: they are for the reader of static/js (about 1 KB compressed)."""
    return _BLANK_LINES.sub(b"", _JS_LINE_COMMENT.sub(b"", script))


def _join(filename: str) -> bytes:
    parts = []
    for member in BUNDLES[filename]:
        with open(os.path.join(current_app.static_folder, member), "rb") as file:
            source = file.read()
        if filename in MODULES:
            source = b"{ // " + member.encode() + b"\n" + without_line_comments(source) + b"\n}\n"
        elif filename.endswith(".js"):
            source += b"\n;\n"  # a classic script may end without its semicolon
        else:
            source = without_comments(source) + b"\n"
        parts.append(source)
    return b"".join(parts)
