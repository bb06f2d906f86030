"""Endpoints: the provider connections a user can pick a model from.

An endpoint with `user_id` NULL is shared (added by an admin or auto-detected at first
start) and visible to every user; the others belong to one user. The API key is stored but
never leaves this module's callers in a response: serialisers use `Endpoint.to_dict()`,
which only says whether a key is set.

A non-admin's own endpoint is held to the address guard (numi/addresses.py): its base URL
may not be internal when it is saved, and every request to it (redirects included) is
checked and pinned. Shared endpoints are an admin's and may be local (Ollama).
"""

from __future__ import annotations

import logging
import socket
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import gevent
from flask import current_app
from sqlalchemy import bindparam, or_, select

from .addresses import AddressRefused, check_url, guarded_transport
from .cpu_pool import import_off_hub
from .endpoint_settings import SETTINGS_FIELDS, model_capabilities_input
from .providers import get_adapter
from .providers.capabilities import listed_capabilities
from .providers.errors import ProviderError, unreachable
from .setting_values import parse_bool
from .errors import NotFound, NumiError, invalid
from .extensions import db
from .services import services
from .models import REASONING_POLICIES, Chat, Endpoint, Message, User, utcnow
from .providers.kinds import get_kind, kind_names
from .redaction import check_rules
from .redaction.rules import setting_view

log = logging.getLogger(__name__)


def visible(user_id: int):
    """The SQL condition for endpoints `user_id` may see and use."""
    return (
        or_(Endpoint.user_id == user_id, Endpoint.user_id.is_(None)),
        Endpoint.deleted_at.is_(None),
    )


# Built once: every /v1 request lists them (and turns read one) with these.
_VISIBLE = visible(bindparam("user_id"))
_VISIBLE_ENDPOINTS = select(Endpoint).where(*_VISIBLE).order_by(Endpoint.name, Endpoint.id)
_VISIBLE_ENDPOINT = select(Endpoint).where(Endpoint.id == bindparam("endpoint_id"), *_VISIBLE)


def list_endpoints(user_id: int) -> list[Endpoint]:
    return list(db.session.execute(_VISIBLE_ENDPOINTS, {"user_id": user_id}).scalars())


def get_endpoint(user_id: int, endpoint_id: int) -> Endpoint:
    """A live endpoint the user can see, or NotFound."""
    endpoint = db.session.execute(
        _VISIBLE_ENDPOINT, {"endpoint_id": endpoint_id, "user_id": user_id}
    ).scalar_one_or_none()
    if endpoint is None:
        raise NotFound("endpoint")
    return endpoint


def get_managed_endpoint(user_id: int, is_admin: bool, endpoint_id: int) -> Endpoint:
    """An endpoint the user may change: their own, or a shared one if they are an admin."""
    endpoint = get_endpoint(user_id, endpoint_id)
    if endpoint.user_id is None and not is_admin:
        raise NotFound("endpoint")
    return endpoint


def find_by_name(user_id: int | None, name: str) -> Endpoint | None:
    cond = [Endpoint.name == name, Endpoint.deleted_at.is_(None)]
    if user_id is None:
        cond.append(Endpoint.user_id.is_(None))
    else:
        cond.extend(visible(user_id))
    return db.session.execute(select(Endpoint).where(*cond).limit(1)).scalar_one_or_none()


def validate(
    fields: dict[str, Any], *, max_name: int = 100, partial: bool = False
) -> dict[str, Any]:
    """Check endpoint input; returns the clean values. Raises NumiError on the first problem."""
    clean: dict[str, Any] = {}
    if not partial or "name" in fields:
        name = fields.get("name")
        if not isinstance(name, str) or not name.strip():
            raise invalid("An endpoint needs a name.")
        if len(name) > max_name:
            raise invalid(f"name is too long (at most {max_name} characters).", "too_long")
        clean["name"] = name.strip()
    if not partial or "kind" in fields:
        kind = fields.get("kind")
        if kind not in kind_names():
            raise invalid(
                f"Unknown endpoint kind {str(kind)[:40]!r}; use one of {', '.join(kind_names())}.",
                "unknown_kind",
            )
        clean["kind"] = kind
    if not partial or "base_url" in fields:
        clean["base_url"] = _base_url(fields.get("base_url"))
    if fields.get("api_key") not in (None, ""):
        if not isinstance(fields["api_key"], str) or len(fields["api_key"]) > 1000:
            raise invalid("api_key must be text of at most 1000 characters.")
        clean["api_key"] = fields["api_key"].strip()
    if "default_model" in fields:
        model = fields.get("default_model") or ""
        if not isinstance(model, str) or len(model) > 200:
            raise invalid("default_model must be text of at most 200 characters.")
        clean["default_model"] = model.strip() or None
    if "reasoning_policy" in fields:
        if fields["reasoning_policy"] not in REASONING_POLICIES:
            raise invalid(f"reasoning_policy must be one of {', '.join(REASONING_POLICIES)}.")
        clean["reasoning_policy"] = fields["reasoning_policy"]
    if "enabled" in fields:
        clean["enabled"] = parse_bool(fields["enabled"], "enabled")
    if "hidden_models" in fields:
        clean["hidden_models"] = _hidden_models(fields["hidden_models"])
    if "retries" in fields:
        clean["retries"] = parse_bool(fields["retries"], "retries")
    if "model_capabilities" in fields:
        clean["model_capabilities"] = model_capabilities_input(fields["model_capabilities"])
    if "redaction" in fields:
        clean["redaction"] = check_rules(fields["redaction"])
    if "prompt_caching" in fields:
        clean["prompt_caching"] = parse_bool(fields["prompt_caching"], "prompt_caching")
    return clean


def redaction_view(endpoint: Endpoint) -> dict[str, Any]:
    """The endpoint's privacy gateway as it applies (`numi.redaction.rules.setting_view`)."""
    return setting_view(endpoint.settings.get("redaction"), endpoint.base_url)


def endpoint_dict(endpoint: Endpoint, viewer: Any = None) -> dict[str, Any]:
    """The endpoint for the API (`Endpoint.to_dict`) with its privacy gateway and prompt
    caching: `redaction.enabled` as it applies (`automatic`: decided by the address, on
    outside this machine's network). A shared endpoint's words and patterns are its
    admin's: other users see how many there are, not what they are."""
    redaction = redaction_view(endpoint)
    if viewer is not None and not (viewer.is_admin or endpoint.user_id == viewer.id):
        redaction["words"] = len(redaction["words"])
        redaction["patterns"] = len(redaction["patterns"])
    return {
        **endpoint.to_dict(viewer),
        "redaction": redaction,
        "prompt_caching": endpoint.settings.get("prompt_caching", True) is not False,
    }


MAX_HIDDEN_MODELS = 2000


def _hidden_models(value: Any) -> list[str]:
    """Model ids to leave out of the pickers: a list of ids (duplicates and blanks dropped)."""
    if value is None:
        return []
    if (
        not isinstance(value, list)
        or len(value) > MAX_HIDDEN_MODELS
        or not all(isinstance(m, str) and len(m) <= 200 for m in value)
    ):
        raise invalid(f"hidden_models must be a list of at most {MAX_HIDDEN_MODELS} model ids.")
    return list(dict.fromkeys(m.strip() for m in value if m.strip()))


def _base_url(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 500:
        raise invalid("base_url must be a URL of at most 500 characters.", "invalid_url")
    value = value.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid("base_url must be an http:// or https:// URL.", "invalid_url")
    return value


def guarded(endpoint: Endpoint) -> bool:
    """Whether connections to `endpoint` pass the address guard: it belongs to a non-admin."""
    return _owner_guarded(endpoint.user_id)


def _owner_guarded(owner_id: int | None) -> bool:
    if owner_id is None:
        return False
    owner = db.session.get(User, owner_id)
    return owner is None or not owner.is_admin


def check_address(
    endpoint: Endpoint | None = None,
    *,
    base_url: str | None = None,
    owner_id: int | None = None,
    status: int = 403,
    is_guarded: bool | None = None,
) -> None:
    """Refuse (NumiError `address_refused`) a guarded endpoint whose base URL is internal.
    A host that does not resolve passes here: connecting then fails as unreachable.
    `is_guarded`: `guarded(endpoint)`, when the caller knows it already."""
    if endpoint is not None:
        base_url, owner_id = endpoint.base_url, endpoint.user_id
    if not (_owner_guarded(owner_id) if is_guarded is None else is_guarded):
        return
    try:
        check_url(base_url or "", resolvable=False)
    except AddressRefused as exc:
        log.info("endpoint address of user %s refused: %s", owner_id, exc)
        raise exc.to_error(status) from None


def create_endpoint(
    owner_id: int | None, fields: dict[str, Any], *, max_name: int = 100
) -> Endpoint:
    clean = validate(fields, max_name=max_name)
    check_address(base_url=clean["base_url"], owner_id=owner_id, status=400)
    if find_by_name(owner_id, clean["name"]) is not None:
        raise NumiError(
            "duplicate_name", f"An endpoint named {clean['name']!r} exists already.", 409
        )
    settings = {k: clean.pop(k) for k in SETTINGS_FIELDS if k in clean}
    endpoint = Endpoint(user_id=owner_id, **clean)
    endpoint.settings = settings
    db.session.add(endpoint)
    db.session.commit()
    return endpoint


def add_endpoint(
    user_id: int, is_admin: bool, fields: dict[str, Any], *, max_name: int
) -> Endpoint:
    """An endpoint a user adds (the API's JSON, Settings' form): their own, or shared when an
    admin asks (`shared`; a non-admin's is theirs). Its model list is fetched at once, with
    or without a default model: the pickers offer it, and its context sizes and capabilities
    count from the first turn (a failure is kept on the endpoint and shows on Test)."""
    fields = dict(fields)
    shared = parse_bool(fields.pop("shared", None), "shared") and is_admin
    endpoint = create_endpoint(None if shared else user_id, fields, max_name=max_name)
    fetch_models(endpoint)
    return endpoint


def update_endpoint(endpoint: Endpoint, fields: dict[str, Any], *, max_name: int = 100) -> Endpoint:
    """Apply an edit. Every field is checked first (`validate`, the same rules as adding);
    an empty or missing api_key keeps the stored key (keys are replaced, never shown)."""
    clean = validate(fields, max_name=max_name, partial=True)
    if "name" in clean and clean["name"] != endpoint.name:
        other = find_by_name(endpoint.user_id, clean["name"])
        if other is not None and other.id != endpoint.id:
            raise NumiError(
                "duplicate_name", f"An endpoint named {clean['name']!r} exists already.", 409
            )
    if "base_url" in clean:
        check_address(base_url=clean["base_url"], owner_id=endpoint.user_id, status=400)
    if connection_changed(endpoint, clean):
        # Another server's (or account's) list is not this one's: the caller fetches the
        # new one after saving. Any other edit keeps the list (the form sends the URL,
        # kind and an empty key on every save; only a real change counts).
        endpoint.models_json, endpoint.models_fetched_at = None, None
    settings = {k: clean.pop(k) for k in SETTINGS_FIELDS if k in clean}
    if "redaction" in settings:  # the fields given change, the others stay
        settings["redaction"] = {
            **(endpoint.settings.get("redaction") or {}),
            **settings["redaction"],
        }
    if settings:
        endpoint.settings = {**endpoint.settings, **settings}
    for key, value in clean.items():
        setattr(endpoint, key, value)
    db.session.commit()
    return endpoint


def connection_changed(endpoint: Endpoint, clean: dict[str, Any]) -> bool:
    """Whether an edit points the endpoint at another server or account."""
    return any(
        name in clean and clean[name] != getattr(endpoint, name)
        for name in ("base_url", "kind", "api_key")
    )


def remove_endpoint(endpoint: Endpoint) -> None:
    endpoint.deleted_at = utcnow()
    db.session.commit()


def endpoint_adapter(app, endpoint: Endpoint):
    """The cached adapter (`cached_adapter`) of a stored endpoint, its address checked first
    and its connections guarded when its owner is not an admin."""
    check_address(endpoint)
    return cached_adapter(
        app, endpoint.kind, endpoint.base_url, endpoint.api_key, guarded=guarded(endpoint)
    )


def usable_by(endpoint: Endpoint | None, user_id: int) -> bool:
    """Whether a stored endpoint (found by id, not through `get_endpoint`) may still serve
    `user_id`: not deleted, turned on, and theirs or shared."""
    return (
        endpoint is not None
        and endpoint.deleted_at is None
        and endpoint.enabled
        and endpoint.user_id in (None, user_id)
    )


def cached_adapter(
    app,
    kind: str,
    base_url: str,
    api_key: str | None,
    guarded: bool = False,
    retries: bool = True,
):
    """A provider adapter for turns, kept per endpoint settings so connections are reused
    (a new SDK client per turn would cost a TCP and TLS handshake each time). `guarded`
    sends every request through the address guard; `retries` False makes one attempt
    only (an endpoint behind a gateway that retries itself)."""
    cache = services(app).adapters
    key = (kind, base_url, api_key, guarded, retries)
    adapter = cache.get(key)
    if adapter is None:
        _import_sdk_off_hub(kind)

        adapter = cache[key] = get_adapter(
            kind,
            base_url,
            api_key,
            timeout=app.config["NUMI_PROVIDER_TIMEOUT_SECONDS"],
            max_retries=app.config["NUMI_PROVIDER_MAX_RETRIES"] if retries else 0,
            max_retry_seconds=app.config["NUMI_PROVIDER_MAX_RETRY_SECONDS"],
            idle_timeout=app.config["NUMI_PROVIDER_IDLE_SECONDS"],
            first_token_timeout=app.config["NUMI_PROVIDER_FIRST_TOKEN_SECONDS"],
            headers_timeout=app.config["NUMI_PROVIDER_HEADERS_SECONDS"],
            transport=guarded_transport() if guarded else None,
        )
    return adapter


def _import_sdk_off_hub(kind: str) -> None:
    """Import the provider SDK in a thread of the CPU pool the first time a turn needs it:
    most of a second of CPU that would freeze the hub's streams; only the turns wait."""
    module = get_kind(kind).sdk_module if kind in kind_names() else None
    if module is not None:
        import_off_hub(module)


def models(endpoint: Endpoint, *, max_age_seconds: int, refresh: bool = False) -> list[dict]:
    """The endpoint's model list, fetched from the provider and cached in `models_json`.

    Raises NumiError with the provider's stable code (provider_auth, provider_unavailable,
    ...) and a message fit to show when the endpoint cannot be reached (naming no address;
    the log has the detail), or `address_refused` for a non-admin's internal address.
    """
    fresh = endpoint.models_fetched_at and utcnow() - endpoint.models_fetched_at < timedelta(
        seconds=max_age_seconds
    )
    if endpoint.models_json and fresh and not refresh:
        return endpoint.models

    is_guarded = guarded(endpoint)
    if is_guarded:
        check_address(endpoint)
    try:
        _import_sdk_off_hub(endpoint.kind)
        adapter = get_adapter(
            endpoint.kind,
            endpoint.base_url,
            endpoint.api_key,
            timeout=10,
            max_retries=0,
            transport=guarded_transport() if is_guarded else None,
        )
        listed = adapter.list_models()
    except ProviderError as exc:
        log.info(
            "listing the models of endpoint %s failed: %s (%r)",
            endpoint.id,
            exc.code,
            exc.__cause__,
        )
        _keep_problem(endpoint, exc.message)  # the old list stays; the pickers say why
        raise NumiError(exc.code, exc.message, 502) from None
    endpoint.models = [_model_dict(m) for m in listed]
    endpoint.models_fetched_at = utcnow()
    endpoint.models_problem = None
    if not endpoint.default_model and endpoint.models:
        endpoint.default_model = endpoint.models[0]["id"]
    db.session.commit()
    return endpoint.models


def fetch_models(endpoint: Endpoint) -> str | None:
    """Fetch the endpoint's model list now (after it was added or pointed elsewhere), so
    its models' context sizes and capabilities count from the first turn. Returns None,
    or why it could not (logged; the endpoint is saved either way)."""
    if not guarded(endpoint) and _refuses_connections(endpoint.base_url):
        # Nothing listens (a local server not started yet): say so without importing
        # the provider SDK, which costs a second of CPU (the CLI and tests add such
        # endpoints). A guarded endpoint is never probed: only its transport connects.
        log.info("models of endpoint %s not fetched: nothing listens", endpoint.id)
        _keep_problem(endpoint, _unreachable_message())
        return endpoint.models_problem
    try:
        models(endpoint, max_age_seconds=0, refresh=True)
    except NumiError as exc:
        log.info("models of endpoint %s not fetched: %s", endpoint.id, exc.code)
        return exc.message
    return None


def _keep_problem(endpoint: Endpoint, message: str) -> None:
    """Remember why the list could not be fetched (shown in Settings and the pickers);
    the list fetched before, if any, stays as it was."""
    endpoint.models_problem = message[:300]
    db.session.commit()


def refresh_stale(endpoints: list[Endpoint]) -> None:
    """Fetch, in the background, the lists of the enabled endpoints a page offers that
    are stale or were never fetched (a page never waits for a provider)."""
    for endpoint in endpoints:
        if endpoint.enabled:
            refresh_when_stale(endpoint)


def _refuses_connections(base_url: str) -> bool:
    """True when the base URL's host actively refuses a TCP connection (no listener)."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:  # unresolvable, unreachable, slow: the real request says what it is
        return False


def _unreachable_message() -> str:
    return unreachable("").message


RETRY_FAILED_REFRESH_SECONDS = 300  # a server without /models is not asked every turn


def refresh_when_stale(endpoint: Endpoint) -> bool:
    """Fetch the endpoint's model list in the background when it was never fetched or
    is older than NUMI_MODELS_CACHE_SECONDS. Never blocks; returns whether it started.
    One job per endpoint and process; a failed fetch is not tried again for 5 minutes."""
    app = current_app._get_current_object()
    max_age = app.config["NUMI_MODELS_CACHE_SECONDS"]
    fetched = endpoint.models_fetched_at
    if fetched is not None and utcnow() - fetched < timedelta(seconds=max_age):
        return False

    jobs = services(app).model_refreshes
    job = jobs.get(endpoint.id)
    if job is not None and (
        not job.dead or time.monotonic() - job.started_at < RETRY_FAILED_REFRESH_SECONDS
    ):
        return False
    job = jobs[endpoint.id] = gevent.spawn(_refresh_job, app, endpoint.id, max_age)
    job.started_at = time.monotonic()
    return True


def wait_for_refreshes(app, timeout: float | None = None) -> None:
    """Wait for the running background list fetches (for tests and the CLI)."""
    gevent.joinall(list(services(app).model_refreshes.values()), timeout=timeout)


def _refresh_job(app, endpoint_id: int, max_age: int) -> None:
    with app.app_context():
        endpoint = db.session.get(Endpoint, endpoint_id)
        if endpoint is None or endpoint.deleted_at is not None:
            return
        try:
            models(endpoint, max_age_seconds=max_age)
        except NumiError as exc:
            log.info("background model list of endpoint %s: %s", endpoint_id, exc.code)
        except Exception:  # the server goes on; the next stale turn tries again
            log.exception("background model list of endpoint %s failed", endpoint_id)
            db.session.rollback()


def _model_dict(info: Any) -> dict[str, Any]:
    fields = ("id", "context_window", "supports_vision", "supports_tools", "supports_reasoning")
    return {f: getattr(info, f, None) for f in fields if getattr(info, f, None) is not None}


def model_capabilities(endpoint: Endpoint, model_id: str):
    """What a model can do (vision, tools, reasoning, context window): as the user set it
    for this endpoint, else as the endpoint's model list reports it, else from the table
    of known families, else defaults."""
    return listed_capabilities(model_id, endpoint.models, endpoint.model_capabilities.get(model_id))


def reported_capabilities(endpoint: Endpoint, model_id: str):
    """What a model can do without the user's per-model settings: as the server reports
    it, else from the family table, else defaults (the Edit form's "as reported")."""
    return listed_capabilities(model_id, endpoint.models)


_SOURCE_LABELS = {
    "override": "your setting",
    "reported": "the server says",
    "family": "assumed from the name",
    "default": "assumed",
}


def capability_source_label(source: str) -> str:
    """Where a capability's value came from, in words."""
    return _SOURCE_LABELS.get(source, "assumed")


def missing_default_model(endpoint: Endpoint) -> str | None:
    """A message when the endpoint's listed models do not include its default model."""
    ids = endpoint.model_ids
    if endpoint.default_model and ids and endpoint.default_model not in ids:
        return f"{endpoint.base_url} does not offer the model {endpoint.default_model!r}."
    return None


def first_model(endpoint: Endpoint) -> str | None:
    """The model a new chat on `endpoint` uses: its default model unless hidden, else the
    first model the pickers offer; None when it lists none."""
    if endpoint.default_model and endpoint.default_model not in endpoint.hidden_models:
        return endpoint.default_model
    ids = endpoint.picker_model_ids
    return ids[0] if ids else None


def default_route(user_id: int, endpoints: list[Endpoint] | None = None) -> Endpoint | None:
    """The endpoint a new chat starts on (of `endpoints`, else the user's): the first
    enabled one with a default model, else the first that lists a model. Never one that
    lists none: a chat would start on a route that cannot answer."""
    candidates = [
        e
        for e in (list_endpoints(user_id) if endpoints is None else endpoints)
        if e.enabled and first_model(e)
    ]
    with_default = [e for e in candidates if e.default_model]
    return (with_default or candidates or [None])[0]


def preselected_route(user_id: int, endpoints: list[Endpoint]) -> str:
    """The picker's `<endpoint id>:<model>` when nothing is chosen yet (the home page's
    composer): the default route's model among the endpoints that have answered, or ""
    (the picker asks for a choice). A just-added endpoint that could not be reached has
    a typed default model but has never answered: the first question would fail on it."""
    endpoint = default_route(user_id, answered(user_id, endpoints))
    return f"{endpoint.id}:{first_model(endpoint)}" if endpoint else ""


def answered(user_id: int, endpoints: list[Endpoint]) -> list[Endpoint]:
    """The endpoints that have answered: listed their models once, or gave one of the
    user's chats an answer (not an error) (a gateway whose model list fails but whose chats work). The
    query runs only when an endpoint has never listed its models."""
    unlisted = [e.id for e in endpoints if e.models_fetched_at is None]
    used: set[int] = set()
    if unlisted:
        used = set(
            db.session.execute(
                select(Chat.endpoint_id)
                .where(
                    Chat.user_id == user_id,
                    Chat.endpoint_id.in_(unlisted),
                    select(Message.id)
                    .where(
                        Message.chat_id == Chat.id,
                        Message.role == "assistant",
                        Message.content != "",
                        # not a failed answer's placeholder (meta.error)
                        or_(Message.meta_json.is_(None), ~Message.meta_json.contains('"error"')),
                    )
                    .exists(),
                )
                .distinct()
            ).scalars()
        )
    return [e for e in endpoints if e.models_fetched_at is not None or e.id in used]
