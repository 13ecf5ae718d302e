"""What a provider reports is left of its rate limits, and holding a request back before a 429."""

from app.providers.headroom import CREATE_RESERVE, Headroom, parse_rate_limit
from tests.clock import TICK, FakeClock

VERDA = '"project";r=486;t=37, "endpoint";r=48;t=37'


def test_the_ietf_header_as_verda_sends_it() -> None:
    assert parse_rate_limit(VERDA) == {"project": (486, 37.0), "endpoint": (48, 37.0)}
    assert parse_rate_limit("default;r=5;t=2") == {"default": (5, 2.0)}
    # Items that do not say both what is left and when it resets are left out.
    assert parse_rate_limit('"a";r=5, "b";t=3, "c";r=x;t=1, "d";r=-1;t=1, junk') == {}


def test_a_used_up_endpoint_is_held_until_it_resets_and_only_that_endpoint() -> None:
    clock = FakeClock()
    headroom = Headroom(clock)
    headroom.note("GET", "/instance-availability", '"project";r=400;t=30, "endpoint";r=0;t=12')
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == 12
    assert headroom.wait_before("GET", "/instances", is_create=False) == 0  # never reported
    assert headroom.wait_before("POST", "/oauth2/token", is_create=False) == 0
    clock.advance(12 - TICK)
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == TICK
    clock.advance(TICK)
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == 0
    # The control: with one request left, it goes.
    headroom.note("GET", "/instance-availability", '"project";r=400;t=30, "endpoint";r=1;t=12')
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == 0


def test_a_shared_bucket_keeps_a_reserve_for_creates() -> None:
    headroom = Headroom(FakeClock())
    low = f'"project";r={CREATE_RESERVE};t=20, "endpoint";r=30;t=20'
    headroom.note("GET", "/instance-availability", low)
    headroom.note("POST", "/instances", low)
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == 20
    assert headroom.wait_before("POST", "/instances", is_create=True) == 0  # creates never wait
    above = f'"project";r={CREATE_RESERVE + 1};t=20, "endpoint";r=30;t=20'
    headroom.note("GET", "/instance-availability", above)
    assert headroom.wait_before("GET", "/instance-availability", is_create=False) == 0
    assert headroom.remaining() == {"project": CREATE_RESERVE + 1}
