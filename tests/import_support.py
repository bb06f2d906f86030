"""Importing a file through the public API and waiting for its background job to end.

An import answers 202 with a job at once (numi/web/import_runner.py); these helpers poll
GET /api/imports/<id> until the job is no longer running, through a Flask test client
(whose app runs the job's greenlet in this process: the poll yields to it) or over HTTP
to a live server.
"""

from __future__ import annotations

import os
import re
import time

import gevent
from turn_support import Api, wait_until

JOB_SECONDS = 60  # a generous bound for the tests' small files; reached only on a bug


def run_import(client, path: str = "/api/import", **post) -> dict:
    """POST an import with a test client (`json=`, `data=`...) and wait for its job: the
    ended job (`state` "done" with `result`, or "failed" with `error`). A request refused
    before any job started gives {"state": "refused", "status": ..., "error": ...}."""
    response = client.post(path, **post)
    if response.status_code != 202:
        body = response.get_json(silent=True) or {}
        return {"state": "refused", "status": response.status_code, "error": body.get("error")}
    job = response.get_json()["job"]
    assert response.headers["Location"] == f"/api/imports/{job['id']}"
    return wait_for_job(client, job["id"])


def wait_for_job(client, job_id: int) -> dict:
    """Poll a test client's GET /api/imports/<id> until the job has ended; returns it."""
    deadline, pause = time.monotonic() + JOB_SECONDS, 0.001
    while True:
        job = client.get(f"/api/imports/{job_id}").get_json()["job"]
        if job["state"] != "running":
            return job
        assert time.monotonic() < deadline, f"import job {job_id} still running: {job}"
        gevent.sleep(pause)  # the job's greenlet (and its child's pipe) run meanwhile
        pause = min(pause * 2, 0.05)


def imported_chat(client, document) -> dict:
    """Import `document` with a test client; the first imported chat (asserts success)."""
    job = run_import(client, json=document)
    assert job["state"] == "done", job
    return job["result"]["chat"]


def api_import(api, document) -> dict:
    """POST `document` to a live server's /api/import with a `turn_support.Api` and wait for
    its job through GET /api/imports/<id>; returns the ended job (see `run_import`)."""
    status, body = api.post("/api/import", document)
    if status != 202:
        return {"state": "refused", "status": status, "error": (body or {}).get("error")}
    job_id = body["job"]["id"]

    def ended():
        status, body = api.get(f"/api/imports/{job_id}")
        assert status == 200, body
        return body["job"] if body["job"]["state"] != "running" else None

    return wait_until(ended, JOB_SECONDS, f"import job {job_id} to end")


def api_imported_chat(api, document) -> str:
    """The id of the chat a live server made of `document` (asserts the import succeeded)."""
    job = api_import(api, document)
    assert job["state"] == "done", job
    return job["result"]["chat"]["id"]


def imported_answer(server, answer: str, question: str = "Write a lot") -> str:
    """The id of a chat imported into a live server with one question and its `answer`: an
    answer of any length, saved at once and without a model."""
    doc = {
        "format": "numi.chat",
        "version": 1,
        "chat": {"title": "Long answer"},
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ],
    }
    return api_imported_chat(Api(server.url, token=server.token), doc)


def form_import(client, data: dict):
    """Post the Settings → Import form with a test client, wait for its job, and open its
    progress page again: the response there (a 303 to what was imported, or the page
    with the refusal)."""
    response = client.post("/import", data=data, content_type="multipart/form-data")
    progress = response.headers.get("Location", "")
    assert response.status_code == 303 and progress.startswith("/imports/"), response.status
    wait_for_job(client, int(progress.rsplit("/", 1)[1]))
    return client.get(progress)


def preview_page(client, response) -> str:
    """The preview under the Settings form: the job that the form's Preview step started
    (`response`, its HTMX answer), polled until its preview is drawn."""
    htmx = {"HX-Request": "true"}
    job_id = int(re.search(r'id="import-(\d+)"', response.get_data(as_text=True))[1])

    def polled():
        gevent.sleep(0.01)  # the job's greenlet runs meanwhile
        page = client.get(f"/imports/{job_id}?confirm=1", headers=htmx).get_data(as_text=True)
        return page if "import-preview" in page else None

    return wait_until(polled, what="the preview")


def cli_environment(app) -> dict[str, str]:
    """The environment of a `numi` command on `app`'s data directory and database."""
    return dict(
        os.environ,
        NUMI_DATA_DIR=app.config["NUMI_DATA_DIR"],
        NUMI_DATABASE_URL=app.config["NUMI_DATABASE_URL"],
        NUMI_AUTO_ENDPOINTS="0",
    )
