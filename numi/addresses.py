"""Which addresses Numi may connect to on a user's behalf (the address guard).

Numi makes outgoing connections for users: web pages and search (`fetch_page`,
`web_search`), MCP servers, model endpoints. Unguarded, any user could make the server
reach its own network: a service on 127.0.0.1, Numi's own `/healthz`, a database, a
cloud metadata address. So every connection made for a user who is not an admin goes
through one check:

- the host is resolved and EVERY address it resolves to must be public (not private,
  loopback, link-local, reserved, shared, multicast, ...);
- the connection goes to the address that was checked, so a second DNS answer cannot
  swap it (DNS rebinding); TLS still verifies the certificate for the host name;
- each redirect is a new request and is checked again the same way.

Admins (and the single user of single-user mode, who is an admin) are not guarded: a
local model server (Ollama on 127.0.0.1) is their normal case. Only an admin may widen the
guard for the web tools (`allow_private`, `allowed_hosts`); a non-admin's stored override
is ignored at use.

The httpx transports below are what the provider SDKs (sync) and the MCP SDK (asyncio, in
a worker thread) are given for guarded connections. httpx2 is imported only when one is
built: it comes with the SDKs and is not needed to start the app.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from gevent import monkey

from .errors import NumiError

REFUSED_MESSAGE = (
    "That address is refused: private, loopback and other internal addresses are for "
    "administrators only."
)


class AddressRefused(Exception):
    """A host the guard refuses; `host` and `address` are for logs, not for users."""

    code = "address_refused"

    def __init__(self, host: str, address: str | None = None, reason: str = "internal"):
        super().__init__(f"refused {host} ({address or reason})")
        self.host, self.address, self.reason = host, address, reason

    def to_error(self, status: int = 400) -> NumiError:
        """The NumiError a user sees: the stable code and a message naming no address."""
        return NumiError(self.code, REFUSED_MESSAGE, status)


@dataclass(frozen=True)
class AddressPolicy:
    """What a guarded connection may reach beyond public addresses."""

    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()  # host names, addresses or networks (CIDR)


STRICT = AddressPolicy()


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# IPv6 ranges that are not global but that older Pythons' `is_global` still calls so:
# NAT64 for local use (RFC 8215: its gateway maps into the operator's own, often private,
# IPv4 space, so the embedded address says nothing), SRv6 segment ids (RFC 9602) and the
# second documentation prefix (RFC 9637).
_NOT_GLOBAL_V6 = tuple(
    ipaddress.ip_network(network) for network in ("64:ff9b:1::/48", "5f00::/16", "3fff::/20")
)


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `address` is a public unicast address, also the IPv4 address an IPv6 one
    carries (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo, IPv4-compatible ::a.b.c.d): a
    gateway or the host's own stack turns those into connections to the IPv4 address.
    Local-use NAT64 (64:ff9b:1::/48) is never public."""
    if address.version == 6:
        if any(address in network for network in _NOT_GLOBAL_V6):
            return False
        for embedded in _embedded_ipv4(address):
            if not is_public(embedded):
                return False
    return address.is_global and not address.is_multicast


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    last32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64 or (int(address) >> 32 == 0 and int(address) > 1):  # NAT64, ::a.b.c.d
        found.append(last32)
    return found


def _native_getaddrinfo() -> Callable[..., Any]:
    """The resolver to use from an OS thread with its own event loop (the MCP SDK's): the
    unpatched one, since gevent's resolver belongs to the hub's thread."""
    return (
        monkey.get_original("socket", "getaddrinfo")
        if monkey.is_module_patched("socket")
        else socket.getaddrinfo
    )


def resolve(host: str, port: int, getaddrinfo: Callable[..., Any] | None = None) -> list:
    """Every address `host` resolves to (IPv4-mapped IPv6 unwrapped); [] if it does not."""
    host = host.lower().strip("[]")
    try:
        infos = (getaddrinfo or socket.getaddrinfo)(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        addresses.append(address)
    return addresses


def check_host(
    host: str,
    port: int,
    policy: AddressPolicy = STRICT,
    *,
    getaddrinfo: Callable[..., Any] | None = None,
) -> str:
    """Resolve `host`; refuse (AddressRefused) unless every address may be contacted.
    Returns the address to connect to."""
    host = host.lower().strip("[]")
    addresses = resolve(host, port, getaddrinfo)
    if not addresses:
        raise AddressRefused(host, reason="does not resolve")
    allowed = [h.lower() for h in policy.allowed_hosts]
    if not policy.allow_private and host not in allowed:
        networks = []
        for entry in allowed:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                continue  # a host name: matched above
        for address in addresses:
            if not is_public(address) and not any(address in network for network in networks):
                raise AddressRefused(host, str(address))
    return str(addresses[0])


def check_url(url: str, policy: AddressPolicy = STRICT, *, resolvable: bool = True) -> None:
    """Refuse an http(s) URL whose host is internal. With `resolvable=False` a host that
    does not resolve now passes (a setting may name a host that is down; every connection
    is checked again at use)."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise AddressRefused(url, reason="no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        check_host(parts.hostname, port, policy)
    except AddressRefused as exc:
        if exc.reason == "does not resolve" and not resolvable:
            return
        raise


def guard_for(is_admin: bool) -> AddressPolicy | None:
    """The policy for a user's connections: None (unguarded) for an admin."""
    return None if is_admin else STRICT


# --- httpx transports -----------------------------------------------------------------------


def _pin(request: Any, policy: AddressPolicy, getaddrinfo: Callable[..., Any] | None) -> None:
    """Check the request's host and send it to the checked address (Host header and TLS
    name stay the host's)."""
    url = request.url
    host = url.host
    port = url.port or (443 if url.scheme == "https" else 80)
    address = check_host(host, port, policy, getaddrinfo=getaddrinfo)
    if url.scheme == "https":
        request.extensions = {**request.extensions, "sni_hostname": host}
    request.url = url.copy_with(host=address)


@lru_cache(maxsize=1)
def _transport_classes() -> tuple[type, type]:
    import httpx2  # lazy: start-up time

    class GuardedTransport(httpx2.HTTPTransport):
        def __init__(self, policy: AddressPolicy, **kwargs: Any):
            super().__init__(trust_env=False, **kwargs)  # no proxy from the environment
            self.policy = policy

        def handle_request(self, request):
            _pin(request, self.policy, None)
            return super().handle_request(request)

    class AsyncGuardedTransport(httpx2.AsyncHTTPTransport):
        def __init__(self, policy: AddressPolicy, **kwargs: Any):
            super().__init__(trust_env=False, **kwargs)
            self.policy = policy

        async def handle_async_request(self, request):
            _pin(request, self.policy, _native_getaddrinfo())
            return await super().handle_async_request(request)

    return GuardedTransport, AsyncGuardedTransport


def guarded_transport(policy: AddressPolicy = STRICT) -> Any:
    """An httpx2 transport (sync) that checks and pins every request, redirects included."""
    return _transport_classes()[0](policy)


def guarded_async_transport(policy: AddressPolicy = STRICT) -> Any:
    """The asyncio twin of `guarded_transport`, for the MCP SDK's client."""
    return _transport_classes()[1](policy)


def web_policy(settings: dict[str, Any], is_admin: bool) -> AddressPolicy:
    """The web tools' policy: an admin's overrides apply; a non-admin's never do."""
    if not is_admin:
        return STRICT
    hosts: Iterable[str] = settings.get("allowed_hosts") or ()
    return AddressPolicy(
        bool(settings.get("allow_private")), tuple(h for h in hosts if isinstance(h, str))
    )
