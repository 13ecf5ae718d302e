"""The SSRF guard refuses every address class that leads into private networks."""

import ipaddress

import pytest

from app.services.webhooks.urls import UrlRefused, check_url, embedded_ipv4, refusal, resolve
from tests.dns import fake_dns

REFUSED = {
    "https://127.0.0.1/hook": "loopback",
    "https://127.1/hook": "loopback",  # short form
    "https://2130706433/hook": "loopback",  # decimal form
    "https://0x7f000001/hook": "loopback",  # hex form
    "https://10.0.0.5/hook": "private",
    "https://172.16.3.4/hook": "private",
    "https://192.168.1.1/hook": "private",
    "https://169.254.169.254/latest/meta-data": "link-local",
    "https://100.64.0.1/hook": "carrier-grade NAT",
    "https://0.0.0.0/hook": "unspecified",
    "https://224.0.0.1/hook": "multicast",
    "https://[::1]/hook": "loopback",
    "https://[::ffff:127.0.0.1]/hook": "loopback",
    "https://[::ffff:169.254.169.254]/hook": "link-local",
    "https://[64:ff9b::a9fe:a9fe]/hook": "link-local",  # NAT64 of 169.254.169.254
    "https://[2002:7f00:1::]/hook": "loopback",  # 6to4 of 127.0.0.1
    "https://[fd00::1]/hook": "unique-local",
    "https://[fe80::1]/hook": "link-local",
    "https://[ff02::1]/hook": "multicast",
    "https://localhost/hook": "loopback",  # a name that resolves to loopback
    "https://192.0.2.10/hook": "not a public address",  # documentation range
    "https://[::]/hook": "unspecified",
    "https://[::127.0.0.1]/hook": "reserved",  # IPv4-compatible (::/96), deprecated
    "https://[::7f00:1]/hook": "reserved",  # the same, written in hex
    "https://[::a9fe:a9fe]/hook": "reserved",  # ::169.254.169.254
    "https://[::cb00:7209]/hook": "reserved",  # even with a public IPv4 inside
    "https://127.0.0.1./hook": "loopback",  # a trailing dot changes nothing
    "https://localhost./hook": "loopback",
    # IPv6 forms that embed or reach a refused IPv4 address, or are not global themselves
    "https://[::ffff:0:127.0.0.1]/hook": "loopback",  # IPv4-translated (::ffff:0:0:0/96)
    "https://[::ffff:0:808:808]/hook": "IPv4-translated",  # even with a public IPv4 inside
    "https://[::ffff:10.0.0.1]/hook": "private",  # IPv4-mapped
    "https://[fec0::1]/hook": "site-local",
    "https://[64:ff9b::a00:1]/hook": "private",  # NAT64 of 10.0.0.1
    "https://[64:ff9b:1::7f00:1]/hook": "loopback",  # local-use NAT64 of 127.0.0.1
    "https://[64:ff9b:1::808:808]/hook": "local-use NAT64",
    "https://[2002:c0a8:101::1]/hook": "private",  # 6to4 of 192.168.1.1
    "https://[2002:6440:1::]/hook": "carrier-grade NAT",  # 6to4 of 100.64.0.1
    "https://[2001:0:808:808::f7f7:f7f7]/hook": "Teredo",  # server and client 8.8.8.8
    "https://[2001:0:a00:1::f7f7:f7f7]/hook": "private",  # Teredo server 10.0.0.1
    "https://[ff05::2]/hook": "multicast",
    "https://[fc00::1]/hook": "unique-local",
    "https://[fe80::1:2]/hook": "link-local",
    "https://[2001:db8::1]/hook": "documentation",
    "https://[3fff::1]/hook": "documentation",
    "https://[100::1]/hook": "not a public address",  # discard-only
    "https://[2001:10::1]/hook": "not a public address",  # ORCHID
}

# The positive control: global addresses, and IPv6 forms embedding a global IPv4, still pass.
ACCEPTED = [
    "https://203.0.114.9/hook",
    "https://[2606:4700::1111]/hook",
    "https://[::ffff:8.8.8.8]/hook",  # IPv4-mapped public
    "https://[64:ff9b::808:808]/hook",  # NAT64 of a public IPv4
    "https://[2002:808:808::1]/hook",  # 6to4 of a public IPv4
]


@pytest.mark.parametrize(("url", "kind"), REFUSED.items())
async def test_private_and_special_addresses_are_refused(url: str, kind: str) -> None:
    with pytest.raises(UrlRefused, match=kind):
        await resolve(url, allow_private=False)


@pytest.mark.parametrize("url", ACCEPTED)
async def test_global_addresses_pass(url: str) -> None:
    target = await resolve(url, allow_private=False)
    assert target.address == ipaddress.ip_address(url.split("/")[2].strip("[]"))


@pytest.mark.parametrize(
    "url",
    ["http://[::ffff:0:127.0.0.1]:9000/", "http://[fec0::1]/", "http://[2001:0:a00:1::f7f7:f7f7]/"],
)
async def test_allow_private_still_refuses_translated_site_local_and_teredo(url: str) -> None:
    with pytest.raises(UrlRefused):
        await resolve(url, allow_private=True)
    await resolve("http://[fd00::1]:9000/", allow_private=True)  # control: unique-local opens


SIMULATOR_PATHS = [
    "/_sim/reset",
    "/_SIM/reset",
    "/_sim",
    "/%5fsim/reset",
    "/%255Fsim/reset",  # encoded twice
    "//_sim/reset",
    "/./_sim/reset",
    "/hook/../_sim/reset",
    "/hook/%2e%2e/_sim/reset",
    "/%5c_sim/reset",  # a backslash some servers read as a slash
]


@pytest.mark.parametrize("path", SIMULATOR_PATHS)
async def test_the_simulators_control_api_is_refused_even_where_private_is_allowed(
    path: str,
) -> None:
    with pytest.raises(UrlRefused, match="/_sim"):
        await resolve(f"http://127.0.0.1:9000{path}", allow_private=True)


@pytest.mark.parametrize("path", ["/hook", "/hooks/_sim/reset", "/_simple", "/sim/reset"])
async def test_other_paths_on_a_private_receiver_pass(path: str) -> None:
    await resolve(f"http://127.0.0.1:9000{path}", allow_private=True)


OWN = frozenset({8000, 8001})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8001/hook",
        "http://127.0.0.1:8000/v1/orders",
        "http://localhost:8000/hook",
        "http://[::1]:8001/hook",
        "http://10.1.2.3:8000/hook",
        "http://[::ffff:127.0.0.1]:8001/hook",
    ],
)
async def test_this_services_ports_on_a_local_address_are_refused(url: str) -> None:
    with pytest.raises(UrlRefused, match="this service's"):
        await resolve(url, allow_private=True, refused_ports=OWN)


async def test_other_ports_and_public_receivers_on_those_ports_pass() -> None:
    await resolve("http://127.0.0.1:9000/hook", allow_private=True, refused_ports=OWN)
    await resolve("https://203.0.114.9:8000/hook", allow_private=False, refused_ports=OWN)


async def test_a_public_address_passes_and_is_what_gets_connected_to() -> None:
    target = await resolve("https://203.0.114.9:8443/hooks?x=1", allow_private=False)
    assert str(target.address) == "203.0.114.9"
    assert str(target.pinned_url) == "https://203.0.114.9:8443/hooks?x=1"
    assert target.host_header == "203.0.114.9:8443"


async def test_a_name_is_resolved_once_and_the_request_pinned_to_its_address() -> None:
    target = await resolve("http://localhost:9000/hook", allow_private=True)
    assert target.address == ipaddress.ip_address("127.0.0.1")
    assert target.pinned_url.host == "127.0.0.1"
    assert target.host_header == "localhost:9000"  # the receiver still sees its own name


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://203.0.114.9/hook", "https"),
        ("ftp://203.0.114.9/hook", "https"),
        ("https://user:pw@203.0.114.9/hook", "user name or password"),
        ("https:///hook", "no host"),
        ("not a url", "https"),
    ],
)
async def test_only_plain_https_urls_are_accepted(url: str, reason: str) -> None:
    with pytest.raises(UrlRefused, match=reason):
        await resolve(url, allow_private=False)


async def test_allow_private_opens_loopback_and_private_but_never_metadata() -> None:
    for url in ("http://127.0.0.1:8080/", "http://10.1.2.3/", "http://[::1]:8080/"):
        await resolve(url, allow_private=True)
    for url in (
        "http://169.254.169.254/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://[::127.0.0.1]:8080/",
    ):
        with pytest.raises(UrlRefused):
            await resolve(url, allow_private=True)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://203.0.114.9:0/hook", "port"),
        ("https://203.0.114.9:99999/hook", "port"),
        ("https://203.0.114.9:65536/hook", "port"),
        ("https://203.0.114.9:+443/hook", "port"),  # httpx alone reads these as numbers
        ("https://203.0.114.9:4_43/hook", "port"),
        ("https://203.0.114.9:\u0664\u0664\u0663/hook", "port"),
        ("https://203.0.114.9:https/hook", "port"),
        ("https://hooks example.com/hook", "spaces or percent-encoding"),
        ("https://hooks%00.example.com/hook", "spaces or percent-encoding"),
        ("https://hooks%2eexample.com/hook", "spaces or percent-encoding"),
        ("https://[fe80::1%25eth0]/hook", "spaces or percent-encoding"),
        ("https://hooks_1.example.com/hook", "not a valid host name"),
        ("https://-hooks.example.com/hook", "not a valid host name"),
        ("https://hooks-.example.com/hook", "not a valid host name"),
        ("https://hooks..example.com/hook", "not a valid host name"),
        ("https://hooks*.example.com/hook", "not a valid host name"),
        (f"https://{'h' * 64}.example.com/hook", "not a valid host name"),
        (f"https://{'h.' * 127}com/hook", "not a valid host name"),  # 257 characters
        ("https://xn--zz.example.com/hook", "not a valid URL"),  # not a valid A-label
        ("https://./hook", "no host"),
    ],
)
def test_ports_and_hosts_are_checked_before_any_lookup(url: str, reason: str) -> None:
    with fake_dns({}) as asked, pytest.raises(UrlRefused, match=reason):
        check_url(url, allow_private=False)
    assert asked == []


async def test_ports_at_the_ends_of_the_range_are_fine() -> None:
    for port in (1, 443, 65535):
        target = await resolve(f"https://203.0.114.9:{port}/hook", allow_private=False)
        assert target.pinned_url.port == (None if port == 443 else port)


async def test_a_unicode_name_is_resolved_and_sent_idna_encoded() -> None:
    with fake_dns({"xn--bcher-kva.example": "203.0.114.9"}) as asked:
        target = await resolve("https://B\u00fccher.example/hook", allow_private=False)
    assert asked == ["xn--bcher-kva.example"]
    assert str(target.address) == "203.0.114.9"
    assert target.host_header == target.sni_hostname == "xn--bcher-kva.example"


async def test_a_trailing_dot_is_dropped_before_the_lookup_and_the_request() -> None:
    with fake_dns({"hooks.example.com": "203.0.114.9"}) as asked:
        target = await resolve("https://hooks.example.com./hook", allow_private=False)
    assert asked == ["hooks.example.com"]
    assert (target.host_header, target.sni_hostname) == ("hooks.example.com", "hooks.example.com")
    literal = await resolve("https://203.0.114.9./hook", allow_private=False)
    assert str(literal.pinned_url) == "https://203.0.114.9/hook"


async def test_an_unresolvable_name_is_refused_with_the_reason() -> None:
    with pytest.raises(UrlRefused, match="cannot resolve"):
        await resolve("https://no-such-host.invalid/hook", allow_private=False)


def test_embedded_ipv4_is_unwrapped_from_every_ipv6_form() -> None:
    loopback = ipaddress.IPv4Address("127.0.0.1")
    for form in ("::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"):
        assert embedded_ipv4(ipaddress.IPv6Address(form)) == loopback
    public = ipaddress.IPv6Address("2606:4700::1111")
    assert embedded_ipv4(public) == public
    assert refusal(public, allow_private=False) is None


def test_the_narrowest_range_names_an_address() -> None:
    def named(address: str, *, allow_private: bool = False) -> str | None:
        return refusal(ipaddress.ip_address(address), allow_private=allow_private)

    assert named("::") == "an unspecified address"
    assert named("::1") == "a loopback address"
    assert named("::1", allow_private=True) is None
    assert named("::2") == named("::7f00:1") == "a reserved (IPv4-compatible) address"
    assert named("::7f00:1", allow_private=True) == "a reserved (IPv4-compatible) address"
