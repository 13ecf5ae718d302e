"""The SSRF guard: which webhook URLs and addresses the service may send to.

A URL's host is resolved once; every address it resolves to must pass, and the request then
goes to the checked address (see `sender.py`), so a name cannot resolve to a public address
for the check and to 127.0.0.1 for the connection (DNS rebinding). Registration and every
delivery run the same `resolve`.
"""

import asyncio
import ipaddress
import posixpath
import re
import socket
import urllib.parse
from dataclasses import dataclass

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# The rule: an address passes only if it and every IPv4 address it embeds are global (or in a
# private range `allow_private` opens). The lists name the common refusals and cover what
# Python 3.11's `is_global` misses (::/96, ::ffff:0:0:0/96, fec0::/10, 64:ff9b:1::/48 count as
# global there). Where ranges nest (:: and ::1 inside ::/96) the narrowest one decides.
_NEVER = {
    "an unspecified": ["0.0.0.0/8", "::/128"],
    "a link-local (cloud metadata)": ["169.254.0.0/16", "fe80::/10"],
    "a multicast": ["224.0.0.0/4", "ff00::/8"],
    "a reserved": ["240.0.0.0/4", "255.255.255.255/32"],
    "a reserved (IPv4-compatible)": ["::/96"],  # deprecated; no route one may trust
    "a reserved (IPv4-translated)": ["::ffff:0:0:0/96"],  # SIIT: reaches the IPv4 inside
    "a site-local": ["fec0::/10"],  # deprecated, routed like unique-local where still used
    "a Teredo": ["2001::/32"],  # tunnels to an IPv4 address
    "a documentation": ["2001:db8::/32", "3fff::/20"],
}
_PRIVATE = {
    "a loopback": ["127.0.0.0/8", "::1/128"],
    "a private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
    "a carrier-grade NAT": ["100.64.0.0/10"],
    "a unique-local": ["fc00::/7"],
    "a local-use NAT64": ["64:ff9b:1::/48"],
}
# IPv6 forms whose last 32 bits are the IPv4 address they reach
_LOW_32_BITS = [
    ipaddress.IPv6Network(net) for net in ("64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96")
]
SIMULATOR_PATH = "/_sim"
RESOLVE_TIMEOUT_SECONDS = 5.0
MAX_HOST_LENGTH = 253
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")  # letters, digits, inner hyphens
_AUTHORITY = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#]*)")


def _networks(
    groups: dict[str, list[str]],
) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    return [(name, ipaddress.ip_network(net)) for name, nets in groups.items() for net in nets]


# (name, network, whether allow_private opens it)
RANGES = [(name, net, False) for name, net in _networks(_NEVER)] + [
    (name, net, True) for name, net in _networks(_PRIVATE)
]


class UrlRefused(ValueError):
    """The URL may not receive webhooks; the message says why."""


def embedded_ipv4s(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses inside an IPv4-mapped or -translated, NAT64, 6to4 or Teredo address."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if any(address in network for network in _LOW_32_BITS):
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        server, client = address.teredo
        return [client, server]
    return []


def embedded_ipv4(address: IPAddress) -> IPAddress:
    """The (first) IPv4 address an IPv6 address embeds, else the address itself."""
    inner = embedded_ipv4s(address)
    return inner[0] if inner else address


def _named(address: IPAddress) -> tuple[str, bool] | None:
    found = [
        (network.prefixlen, name, private)
        for name, network, private in RANGES
        if address.version == network.version and address in network
    ]
    if not found:
        return None
    _, name, private = max(found)
    return name, private


def refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """What kind of address this is when webhooks may not go to it (`a loopback address`)."""
    # The embedded IPv4 first: "::ffff:127.0.0.1 is a loopback address" says what it reaches.
    for candidate in [*embedded_ipv4s(address), address]:
        named = _named(candidate)
        if named is not None:
            name, private = named
            if private and allow_private:
                continue
            return f"{name} address"
        if isinstance(candidate, ipaddress.IPv6Address) and candidate.ipv4_mapped is not None:
            continue  # its `is_global` is its IPv4 address's, checked just before
        if not candidate.is_global:
            return "not a public address"
    return None


def simulator_path(path: str) -> bool:
    """Whether a URL path reaches the simulators' control API (`/_sim...`) once a server has
    decoded and normalised it (percent-encoding, case, backslashes, `//`, `.` and `..`)."""
    for _ in range(4):  # "%255f" is "%5f" is "_"
        decoded = urllib.parse.unquote(path)
        if decoded == path:
            break
        path = decoded
    path = posixpath.normpath("/" + path.replace("\\", "/").lower())
    path = "/" + path.lstrip("/")  # normpath keeps a leading "//"
    return path == SIMULATOR_PATH or path.startswith(SIMULATOR_PATH + "/")


def _describe(address: IPAddress) -> str:
    inner = embedded_ipv4(address)
    return str(address) if inner == address else f"{address} (IPv4 {inner})"


@dataclass(frozen=True)
class Target:
    """Where a webhook goes: the URL as given and the checked address to connect to."""

    url: httpx.URL
    address: IPAddress

    @property
    def pinned_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address."""
        return self.url.copy_with(host=str(self.address))

    @property
    def host_header(self) -> str:
        """The Host header the receiver expects."""
        return self.url.netloc.decode("ascii")

    @property
    def sni_hostname(self) -> str:
        """The name TLS asks the receiver's certificate for, IDNA-encoded like the Host header."""
        return self.url.raw_host.decode("ascii")


def _written_port(url: str) -> str:
    """The port as the URL spells it ("" if none): httpx reads "+5", " 5" or "5_0" as numbers."""
    match = _AUTHORITY.match(url)
    authority = match.group(1).rpartition("@")[2] if match else ""
    if authority.startswith("["):
        return authority.partition("]")[2].removeprefix(":")
    return authority.partition(":")[2]


def _check_host(host: str) -> None:
    """Refuse a host that is neither an IP address nor a host name (IDNA names encoded)."""
    if "%" in host:  # httpx writes a space as %20
        raise UrlRefused("the host may not contain spaces or percent-encoding")
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if len(host) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(x) for x in host.split(".")):
        raise UrlRefused("the host is not a valid host name")


def check_url(url: str, *, allow_private: bool) -> httpx.URL:
    """The parsed URL, without a trailing dot on its host, if its form is acceptable."""
    port = _written_port(url)
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise UrlRefused("the port must be a number from 1 to 65535")
    try:
        parsed = httpx.URL(url)
        parsed.host  # noqa: B018 - decodes IDNA labels, which raises for an invalid one
    except (httpx.InvalidURL, ValueError) as exc:
        raise UrlRefused("not a valid URL") from exc  # httpx's reason quotes the input
    if parsed.scheme == "http" and not allow_private:
        raise UrlRefused("webhook URLs must use https")
    if parsed.scheme not in ("http", "https"):
        raise UrlRefused("webhook URLs must use https")
    if parsed.userinfo:
        raise UrlRefused("the URL may not contain a user name or password")
    written = parsed.raw_host.decode("ascii")
    host = written.removesuffix(".")  # "localhost." is localhost: check what is connected to
    if not host:
        raise UrlRefused("the URL has no host")
    _check_host(host)
    if simulator_path(parsed.raw_path.decode("ascii").partition("?")[0]):
        raise UrlRefused("the simulators' control API (/_sim) cannot receive webhooks")
    return parsed if host == written else parsed.copy_with(host=host)


async def resolve(
    url: str, *, allow_private: bool, refused_ports: frozenset[int] = frozenset()
) -> Target:
    """Check the URL, resolve its host once and check every address it resolves to; a
    non-public address on one of `refused_ports` (this service's own) is refused too."""
    parsed = check_url(url, allow_private=allow_private)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.raw_host.decode("ascii")  # IDNA-encoded: the name httpx's request would use
    literal = True
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        literal = False
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, type=socket.SOCK_STREAM
                )
        except TimeoutError as exc:
            raise UrlRefused(f"cannot resolve {parsed.host}: no answer in time") from exc
        except (socket.gaierror, UnicodeError) as exc:
            raise UrlRefused(f"cannot resolve {parsed.host}: {exc}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    if not addresses:
        raise UrlRefused(f"{parsed.host} resolves to no address")
    for address in addresses:
        reason = refusal(address, allow_private=allow_private)
        if reason is None:
            continue
        if literal:
            raise UrlRefused(f"{_describe(address)} is {reason}; webhooks go to public addresses")
        raise UrlRefused(
            f"{parsed.host} resolves to {_describe(address)}, {reason}; "
            "webhooks go to public addresses"
        )
    if port in refused_ports and any(refusal(a, allow_private=False) for a in addresses):
        raise UrlRefused(
            f"port {port} on a local address is this service's or its simulators': "
            "webhooks cannot go there"
        )
    return Target(url=parsed, address=addresses[0])
