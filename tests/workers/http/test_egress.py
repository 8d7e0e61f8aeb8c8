"""The egress policy of ``http::fetch`` as pure checks: URLs, host patterns, address classes."""

from __future__ import annotations

import ipaddress

import pytest

from tackroom.engine.errors import FunctionError
from tackroom.workers.http.egress import (
    EgressRules,
    HostPattern,
    Target,
    address_problem,
    check_addresses,
    check_redirect,
    check_target,
    parse_url,
)


def target(url: str) -> Target:
    return parse_url(url)[1]


def refusal(code: str, check: object, *args: object) -> str:
    with pytest.raises(FunctionError) as caught:
        check(*args)  # type: ignore[operator]
    assert caught.value.code == code, caught.value
    return str(caught.value)


def ips(*texts: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return [ipaddress.ip_address(text) for text in texts]


# -- URLs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Example.COM/a?b", Target("https", "example.com", 443)),
        ("http://example.com./", Target("http", "example.com", 80)),
        ("HTTP://example.com:8080", Target("http", "example.com", 8080)),
        ("http://[::1]:8080/x", Target("http", "::1", 8080)),
        ("https://bücher.example/", Target("https", "xn--bcher-kva.example", 443)),
        ("http://2130706433/", Target("http", "2130706433", 80)),
    ],
)
def test_a_url_names_its_target(url: str, expected: Target) -> None:
    assert target(url) == expected


@pytest.mark.parametrize(
    ("url", "code", "fragment"),
    [
        ("/relative", "invalid_url", "absolute"),
        ("example.com/page", "invalid_url", "absolute"),
        ("http://user:secret@example.com/", "invalid_url", "credentials"),
        ("http://127.0.0.%31/", "invalid_url", "not a host name"),
        ("http://exa mple.com/", "invalid_url", "not a host name"),
        ("http://" + "a" * 64 + ".example/", "invalid_url", "not a host name"),
        ("http://" + "a." * 127 + "com/", "invalid_url", "not a host name"),
        ("ftp://example.com/", "egress_denied", "'ftp' is not supported"),
        ("file:///etc/passwd", "invalid_url", "absolute"),
        ("http://[::1/", "invalid_url", "not a valid URL"),
    ],
)
def test_unusable_urls_are_refused(url: str, code: str, fragment: str) -> None:
    message = refusal(code, parse_url, url)
    assert fragment in message
    assert "secret" not in message


# -- host patterns -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("*", "https://anything.example/", True),
        ("example.com", "https://example.com/", True),
        ("example.com", "https://EXAMPLE.com./", True),
        ("example.com", "https://www.example.com/", False),
        ("*.example.com", "https://a.example.com/", True),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "https://example.com/", False),
        ("*.example.com", "https://badexample.com/", False),
        ("example.com:8443", "https://example.com:8443/", True),
        ("example.com:443", "https://example.com/", True),
        ("example.com:8443", "https://example.com/", False),
        ("127.0.0.1:8080", "http://127.0.0.1:8080/", True),
        ("127.0.0.1", "http://127.0.0.1:9/", True),
        ("[::1]:8080", "http://[::1]:8080/", True),
        ("[::1]:8080", "http://[::1]:8081/", False),
        ("::1", "http://[::1]:8081/", True),
        ("[0:0::1]", "http://[::1]/", True),
        ("bücher.example", "https://xn--bcher-kva.example/", True),
        ("*.bücher.example", "https://www.bücher.example/", True),
    ],
)
def test_host_patterns(pattern: str, url: str, matches: bool) -> None:
    assert HostPattern.parse(pattern).matches(target(url)) is matches


@pytest.mark.parametrize(
    "pattern",
    ["", "example.com:0", "example.com:99999", "example.com:http", "[::1]x", "a/b", "a b"],
)
def test_bad_host_patterns_are_config_errors(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"port|pattern"):
        HostPattern.parse(pattern)


# -- scheme, deny, allow -------------------------------------------------------------------------
def test_the_default_rules_allow_any_host_on_http_and_https() -> None:
    rules = EgressRules.build()
    check_target(rules, target("https://example.com/"))
    check_target(rules, target("http://example.org:8080/"))


def test_a_scheme_must_be_allowed() -> None:
    rules = EgressRules.build(allow_schemes=["https"])
    check_target(rules, target("https://example.com/"))
    message = refusal("egress_denied", check_target, rules, target("http://example.com/"))
    assert "scheme 'http' is not allowed" in message
    assert "worker_config.http.allow_schemes" in message


def test_a_host_not_on_the_allowlist_is_refused_with_the_key_to_change() -> None:
    rules = EgressRules.build(allow_hosts=["api.example.com", "*.cdn.example:8443"])
    check_target(rules, target("https://api.example.com/v1"))
    check_target(rules, target("https://eu.cdn.example:8443/"))
    message = refusal("egress_denied", check_target, rules, target("https://evil.example/x?k=1"))
    assert message == (
        "egress denied: host evil.example:443 is not on worker_config.http.allow_hosts; add it"
        " (e.g. 'evil.example:443') there to allow it"
    )
    refusal("egress_denied", check_target, rules, target("https://eu.cdn.example/"))


def test_an_empty_allowlist_allows_nothing() -> None:
    rules = EgressRules.build(allow_hosts=[])
    refusal("egress_denied", check_target, rules, target("https://example.com/"))


def test_deny_hosts_win_over_allow_hosts() -> None:
    rules = EgressRules.build(allow_hosts=["*"], deny_hosts=["*.internal.example", "x.example:81"])
    check_target(rules, target("http://x.example:80/"))
    message = refusal("egress_denied", check_target, rules, target("https://db.internal.example/"))
    assert "deny_hosts entry '*.internal.example'" in message
    refusal("egress_denied", check_target, rules, target("http://x.example:81/"))


def test_a_redirect_may_not_downgrade_https_to_http_unless_allowed() -> None:
    https, http = target("https://a.example/"), target("http://a.example/")
    message = refusal("egress_denied", check_redirect, EgressRules.build(), https, http)
    assert "allow_scheme_downgrade" in message
    check_redirect(EgressRules.build(allow_scheme_downgrade=True), https, http)
    check_redirect(EgressRules.build(), http, https)


def test_a_redirect_target_is_checked_like_the_first_url() -> None:
    rules = EgressRules.build(allow_hosts=["a.example"])
    message = refusal(
        "egress_denied",
        check_redirect,
        rules,
        target("https://a.example/"),
        target("https://b.example/"),
    )
    assert "b.example:443 is not on" in message


# -- addresses -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("100.127.255.254", "shared (CGNAT)"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "private"),
        ("198.18.0.1", "private"),
        ("0.1.2.3", "private"),
        ("::ffff:127.0.0.1", "IPv4-mapped IPv6"),
        ("::ffff:8.8.8.8", "IPv4-mapped IPv6"),
        ("::127.0.0.1", "reserved"),
        ("2002:7f00:1::", "loopback (embedded IPv4 127.0.0.1)"),
        ("2002:a00:1::", "private (embedded IPv4 10.0.0.1)"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata (embedded IPv4 169.254.169.254)"),
        ("2001:db8::1", "private"),
    ],
)
def test_address_classes(address: str, problem: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "2002:808:808::"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


def test_every_resolved_address_must_be_public() -> None:
    rules = EgressRules.build()
    site = target("https://site.example/")
    check_addresses(rules, site, ips("93.184.216.34", "2606:4700::1111"))
    message = refusal(
        "egress_denied", check_addresses, rules, site, ips("93.184.216.34", "10.0.0.7")
    )
    assert message == (
        "egress denied: site.example resolves to 10.0.0.7, a private address; add '10.0.0.7'"
        " (or the host name) to worker_config.http.allow_private to allow it"
    )
    refusal("egress_denied", check_addresses, rules, site, [])


def test_a_name_that_rebinds_to_loopback_or_metadata_is_refused() -> None:
    rules = EgressRules.build(allow_hosts=["rebind.example"])
    rebind = target("http://rebind.example/")
    refusal("egress_denied", check_addresses, rules, rebind, ips("127.0.0.1"))
    message = refusal("egress_denied", check_addresses, rules, rebind, ips("169.254.169.254"))
    assert "cloud metadata" in message


def test_an_ip_literal_is_checked_too() -> None:
    rules = EgressRules.build()
    local = target("http://127.0.0.1:8080/")
    message = refusal("egress_denied", check_addresses, rules, local, ips("127.0.0.1"))
    assert message.startswith("egress denied: 127.0.0.1 is a loopback address; add '127.0.0.1'")


def test_allow_private_by_network_or_host_name() -> None:
    by_network = EgressRules.build(allow_private=["127.0.0.0/8", "fd00::/8", "10.0.0.5"])
    local = target("http://localhost:8080/")
    check_addresses(by_network, local, ips("127.0.0.1", "fd00::3"))
    check_addresses(by_network, local, ips("10.0.0.5"))
    refusal("egress_denied", check_addresses, by_network, local, ips("10.0.0.6"))
    refusal("egress_denied", check_addresses, by_network, local, ips("127.0.0.1", "192.168.0.1"))

    by_name = EgressRules.build(allow_private=["*.corp.example", "localhost:8080"])
    check_addresses(by_name, target("https://wiki.corp.example/"), ips("10.9.8.7"))
    check_addresses(by_name, local, ips("127.0.0.1", "::1"))
    refusal("egress_denied", check_addresses, by_name, target("http://localhost:9/"), ips("::1"))
    refusal("egress_denied", check_addresses, by_name, target("http://x.example/"), ips("10.0.0.1"))


def test_metadata_addresses_need_an_entry_naming_exactly_them() -> None:
    wide = EgressRules.build(allow_private=["169.254.0.0/16", "0.0.0.0/0", "*"])
    meta = target("http://169.254.169.254/latest/meta-data/")
    refusal("egress_denied", check_addresses, wide, meta, ips("169.254.169.254"))
    check_addresses(wide, meta, ips("169.254.1.1"))
    exact = EgressRules.build(allow_private=["169.254.169.254/32"])
    check_addresses(exact, meta, ips("169.254.169.254"))
    named = EgressRules.build(allow_private=["metadata.google.internal"])
    check_addresses(named, target("http://metadata.google.internal/"), ips("169.254.169.254"))


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "bad host", "x.example:0"])
def test_bad_allow_private_entries_are_config_errors(entry: str) -> None:
    with pytest.raises(ValueError, match=r"pattern|port"):
        EgressRules.build(allow_private=[entry])
