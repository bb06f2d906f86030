"""The installable page's routes without a browser: the manifest and the worker are public
(a browser fetches the manifest without cookies), always revalidated, and the worker's app
shell names the current fingerprinted URL of every file it lists; logging out tells the
browser to forget what it kept."""

from __future__ import annotations

import json
import re


def test_the_manifest_and_worker_are_public_and_revalidated(multi_app):
    stranger = multi_app.test_client()  # no session: what a manifest fetch looks like
    manifest = stranger.get("/manifest.webmanifest")
    assert manifest.status_code == 200 and manifest.mimetype == "application/manifest+json"
    assert manifest.headers["Cache-Control"] == "no-cache"
    body = manifest.get_json()
    assert body["display"] == "standalone" and body["start_url"] == "/"
    for icon in body["icons"]:
        assert stranger.get(icon["src"]).status_code == 200

    worker = stranger.get("/sw.js")
    assert worker.status_code == 200 and worker.mimetype == "text/javascript"
    assert worker.headers["Cache-Control"] == "no-cache"
    assert worker.headers["Service-Worker-Allowed"] == "/"
    shell = json.loads(re.match(r"const SHELL = (.*);\n", worker.get_data(as_text=True)).group(1))
    assert "/static/offline.html?v=" in " ".join(shell["urls"])
    for url in shell["urls"]:
        assert re.search(r"\?v=[0-9a-f]{12}$", url), url
        response = stranger.get(url)
        assert response.status_code == 200 and "immutable" in response.headers["Cache-Control"]
    # Nothing private is in the shell: only static files.
    assert all(url.startswith("/static/") for url in shell["urls"])


def test_the_worker_changes_when_a_static_file_changes(sqlite_app, tmp_path):
    import shutil

    first = sqlite_app.test_client().get("/sw.js").get_data()
    static = tmp_path / "static"
    shutil.copytree(sqlite_app.static_folder, static)
    with open(static / "js" / "app.js", "a") as script:
        script.write("\n// the next release\n")
    sqlite_app.static_folder = str(static)
    second = sqlite_app.test_client().get("/sw.js").get_data()
    assert first != second  # so the browser installs the new worker and offers the reload


def test_logout_clears_what_the_browser_kept(multi_app, users, client_a):
    response = client_a.post("/logout")
    assert response.status_code == 302
    assert response.headers["Clear-Site-Data"] == '"cache", "storage"'


def test_the_policy_lets_recorded_and_spoken_audio_play(sqlite_client):
    policy = sqlite_client.get("/").headers["Content-Security-Policy"]
    assert "media-src 'self' blob:" in policy and "script-src 'self';" in policy


def test_the_shell_holds_every_script_a_chat_page_runs_or_loads_on_first_use(client_a):
    # Offline, a kept chat page can only run what the worker precached: its scripts, and the
    # modules app.js imports on first use (Voice, the artifact panel, the Settings overlay)
    # from their meta tags.
    chat_id = client_a.post("/api/session", json={}).get_json()["id"]
    page = client_a.get(f"/c/{chat_id}").get_data(as_text=True)
    on_first_use = dict(re.findall(r'<meta name="numi-(\w+)-module" content="([^"]+)"', page))
    assert set(on_first_use) == {"voice", "artifacts", "settings"}, on_first_use
    scripts = re.findall(r'<script[^>]* src="([^"]+)"', page)
    assert any("/bundle/chat.js" in url for url in scripts), scripts
    worker = client_a.get("/sw.js").get_data(as_text=True)
    shell = json.loads(re.match(r"const SHELL = (.*);\n", worker).group(1))["urls"]
    for url in [*scripts, *on_first_use.values()]:
        assert url in shell, url
