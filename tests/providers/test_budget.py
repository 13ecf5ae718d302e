"""The poll budget's arithmetic, on an injected clock, judged by the simulators' own counters."""

import itertools
import math
import random
from collections import deque

import pytest

from app.providers import budget as planning
from app.providers.budget import Budget, RateLimit, StockRead, every_request
from app.providers.headroom import CREATE_RESERVE, Headroom
from app.providers.hyperstack import limits as hyperstack
from app.providers.verda import limits as verda
from app.simulators.limits import FixedWindowLimiter
from tests.clock import FakeClock


def hyperstack_budget(clock: FakeClock) -> Budget:
    return Budget(
        hyperstack.RATE_LIMITS,
        create=hyperstack.CREATE,
        is_stock_read=hyperstack.is_stock_read,
        clock=clock,
    )


def read_when_allowed(budget: Budget, clock: FakeClock, read: StockRead, until: float) -> int:
    """Send `read` each time the budget allows it until `until`; how many were sent."""
    sent = 0
    while True:
        clock.now += budget.wait(read)
        if clock.now >= until:
            return sent
        for method, path in read:
            budget.sent(method, path)
        sent += 1


def test_reads_are_spread_evenly_over_what_the_limit_leaves() -> None:
    clock = FakeClock()
    budget = hyperstack_budget(clock)
    start = clock.now
    reads = read_when_allowed(budget, clock, hyperstack.STOCK_READ, until=start + 60)
    usable = 500 - max(planning.CREATE_MARGIN_MIN, int(500 * planning.CREATE_MARGIN_SHARE))
    share = usable - math.ceil(usable * planning.OTHERS_SHARE)  # some kept for other requests
    # Two requests a read; the margin is kept for creates; the reads' share is spent, spread
    # over the window as counted (the provider's and the slack for arrival lag).
    span = 60 + planning.WINDOW_SLACK
    expected = share / 2 * 60 / span
    assert expected - 2 <= reads <= expected + 1  # both ends of the minute
    assert budget.nominal_period(hyperstack.STOCK_READ) == pytest.approx(span * 2 / share)
    for method, path in hyperstack.STOCK_READ:
        budget.sent(method, path)
    assert budget.wait(hyperstack.STOCK_READ) > 0  # just read: the next one is not due yet


def test_reads_never_stall_on_the_limit_they_are_spread_under() -> None:
    """Over minutes of reads as the plan allows and other requests at a steady rate with
    random bursts, the plan never fills the window: no gap between two reads is much longer
    than the planned one (a full window holds the reads back until its oldest requests
    leave, which is a stall of many periods)."""
    clock = FakeClock()
    budget = hyperstack_budget(clock)
    rng = random.Random(7)
    until = clock.now + 300
    next_other = clock.now
    reads: list[float] = []
    while clock.now < until:
        wait = budget.wait(hyperstack.STOCK_READ)
        if next_other <= clock.now + wait:  # others come first (a Poisson stream, 120 a minute)
            clock.now = max(clock.now, next_other)
            budget.sent("GET", "/core/virtual-machines/1")
            next_other += rng.expovariate(2.0)
            continue
        clock.now += wait
        for method, path in hyperstack.STOCK_READ:
            budget.sent(method, path)
        reads.append(clock.now)
    gaps = sorted(b - a for a, b in itertools.pairwise(reads[len(reads) // 4 :]))
    typical = gaps[len(gaps) // 2]
    assert gaps[-1] < 2 * typical, f"a read waited {gaps[-1]:.2f} s; typically {typical:.2f} s"


def test_other_requests_shrink_the_reads_share() -> None:
    clock = FakeClock()
    budget = hyperstack_budget(clock)
    for _ in range(200):
        budget.sent("GET", "/core/virtual-machines/1")  # status reads of creates, say
    reads = read_when_allowed(budget, clock, hyperstack.STOCK_READ, until=clock.now + 60)
    margin = max(planning.CREATE_MARGIN_MIN, int(500 * planning.CREATE_MARGIN_SHARE))
    assert reads <= (500 - margin - 200) // 2
    assert reads >= (500 - margin - 200) // 2 - 2


def soak(
    budget: Budget, clock: FakeClock, minutes: int, seed: int, fixed_period: float | None = None
) -> tuple[int, int]:
    """Reads as the budget allows, and a burst of ten creates and their status reads at a random
    moment of every minute. Returns the 429s a fixed-window counter (the simulators') would
    send, and the requests that found 500 already sent in the 60 s before them (how a provider
    counting sliding windows, the strictest way, would refuse)."""
    limiter = FixedWindowLimiter()
    rng = random.Random(seed)
    fixed = sliding = 0
    window: deque[float] = deque()
    start = clock.now
    bursts = [start + 60 * m + rng.uniform(0, 60) for m in range(minutes)]

    def send(method: str, path: str) -> None:
        nonlocal fixed, sliding
        budget.sent(method, path)
        fixed += limiter.hit("ip", 500, 60, clock.now) is not None
        while window and window[0] <= clock.now - 60:
            window.popleft()
        sliding += len(window) >= 500
        window.append(clock.now)

    while clock.now < start + 60 * minutes:
        wait = budget.wait(hyperstack.STOCK_READ)
        if fixed_period is not None:  # a poller that does not plan: every period, as told
            wait = max(0.0, budget.last_read_at + fixed_period - clock.now)
        if bursts and clock.now + wait >= bursts[0]:
            clock.now = bursts.pop(0)
            for vm in range(10):
                send(*hyperstack.CREATE)  # creates never wait for the budget
                send("GET", f"/core/virtual-machines/{vm}")
            continue
        clock.now += wait
        for request in hyperstack.STOCK_READ:
            send(*request)
    return fixed, sliding


def test_creates_and_their_follow_ups_always_find_room() -> None:
    clock = FakeClock()
    assert soak(hyperstack_budget(clock), clock, minutes=30, seed=1) == (0, 0)
    # The control: reading at the fixed period that spends the limit (two requests every
    # 0.24 s is 500 a minute), the same load is refused now and then.
    clock = FakeClock()
    refused = soak(hyperstack_budget(clock), clock, minutes=30, seed=1, fixed_period=0.24)
    assert refused[0] > 0 and refused[1] > 0


def test_other_requests_are_held_before_they_take_the_reads_share() -> None:
    clock = FakeClock()
    budget = hyperstack_budget(clock)
    budget.sent(*hyperstack.STOCK_READ[0])  # reads count in the "ip" bucket
    usable = 500 - max(planning.CREATE_MARGIN_MIN, int(500 * planning.CREATE_MARGIN_SHARE))
    allowed = usable - int(usable * planning.READ_FLOOR_SHARE)
    for _ in range(allowed - 1):
        assert budget.hold("GET", "/core/virtual-machines/1") == 0
        budget.sent("GET", "/core/virtual-machines/1")
    assert budget.hold("GET", "/core/virtual-machines/1") == 0  # the last one allowed
    budget.sent("GET", "/core/virtual-machines/1")
    held = budget.hold("GET", "/core/virtual-machines/1")
    assert 60 < held <= 60 + planning.WINDOW_SLACK  # until the first of them leaves the window
    assert budget.hold(*hyperstack.CREATE) == 0  # creates are never held
    assert budget.wait(hyperstack.STOCK_READ) < 1  # and the reads still have their share


def test_urgent_requests_take_the_reads_share_but_never_pass_the_limit() -> None:
    clock = FakeClock()
    budget = hyperstack_budget(clock)
    path = "/core/virtual-machines"
    usable = 500 - max(planning.CREATE_MARGIN_MIN, int(500 * planning.CREATE_MARGIN_SHARE))
    budget.sent(*hyperstack.STOCK_READ[0])
    while budget.hold("GET", path) == 0:
        budget.sent("GET", path)
    assert budget.hold("GET", path, urgent=True) == 0  # held for the reads, not for a delete
    for _ in range(usable - sum(len(b.sent) for b in budget.buckets.values())):
        assert budget.hold("DELETE", f"{path}/7", urgent=True) == 0
        budget.sent("DELETE", f"{path}/7")
    held = budget.hold("DELETE", f"{path}/7", urgent=True)  # at the limit less the margin
    assert 60 < held <= 60 + planning.WINDOW_SLACK
    clock.advance(held)
    assert budget.hold("DELETE", f"{path}/7", urgent=True) == 0  # the oldest left the window


def verda_budget(clock: FakeClock, headroom: Headroom | None = None) -> Budget:
    return Budget(
        verda.RATE_LIMITS,
        create=verda.CREATE,
        is_stock_read=verda.is_stock_read,
        headroom=headroom,
        clock=clock,
    )


def test_verda_interleaves_the_full_list_with_the_types_waited_for() -> None:
    clock = FakeClock()
    budget = verda_budget(clock)
    reads = [verda.FULL_READ, verda.type_read("1H100.80S.30V"), verda.type_read("8B300.30V")]
    limiter = FixedWindowLimiter()
    chosen: list[StockRead] = []
    times: list[float] = []
    start = clock.now
    while True:
        wait, read = budget.soonest(reads)
        clock.now += wait
        if clock.now >= start + 120:
            break
        times.append(clock.now)
        ((method, path),) = read
        budget.sent(method, path)
        over = limiter.hit("project", 500, 60, clock.now) or limiter.hit(path, 60, 60, clock.now)
        assert over is None
        chosen.append(read)
    # Each path is its own bucket of 60 a minute, so three paths give about three times the
    # reads of the full list alone, and the full list is still read as often as it may be.
    per_minute = {read: chosen.count(read) / 2 for read in reads}
    top = 58 - math.ceil(58 * planning.OTHERS_SHARE)  # a little kept for follow-up reads
    assert all(top - 3 <= n <= top for n in per_minute.values()), per_minute
    assert chosen[:3] == reads  # the full list first, then each type in turn
    # Evenly spaced between the paths too, not three reads at once and then a pause.
    gaps = [later - earlier for earlier, later in itertools.pairwise(times[3:])]
    assert min(gaps) > 0.9 * 60 / top / 3


def test_with_more_types_than_the_project_allows_every_type_takes_its_turn() -> None:
    """30 waited-for types: the project's 500 a minute, not the paths' 60, is what binds. The
    full list, which sees every type, keeps its own path's pace; the types share the rest in
    turn. (Ranked by the project bucket every read shares, the paths late in the list were
    never read: the stock of 21 of the 30 types went unseen by their own reads.)"""
    clock = FakeClock()
    budget = verda_budget(clock)
    reads = [verda.FULL_READ, *(verda.type_read(f"1T{n:02}.10V") for n in range(30))]
    limiter = FixedWindowLimiter()
    times: dict[StockRead, list[float]] = {read: [] for read in reads}
    start = clock.now
    while clock.now < start + 120:
        wait, read = budget.soonest(reads)
        clock.now += max(wait, planning.MIN_READ_SECONDS)
        ((method, path),) = read
        budget.sent(method, path)
        over = limiter.hit("project", 500, 60, clock.now) or limiter.hit(path, 60, 60, clock.now)
        assert over is None
        times[read].append(clock.now)
    per_minute = {read: len(at) / 2 for read, at in times.items()}
    top = 58 - math.ceil(58 * planning.OTHERS_SHARE)
    assert 0.85 * top <= per_minute[verda.FULL_READ] <= top, per_minute[verda.FULL_READ]
    types = [per_minute[read] for read in reads[1:]]
    assert min(types) >= 0.9 * max(types) > 0, types  # in turn: none left behind
    assert sum(per_minute.values()) >= 0.8 * 475  # the project's limit less the creates' margin
    longest = max(b - a for read in reads[1:] for a, b in itertools.pairwise(times[read]))
    assert longest < 1.5 * 60 / min(types)


def test_a_follow_up_read_needs_room_but_not_its_turn() -> None:
    clock = FakeClock()
    budget = verda_budget(clock)
    budget.sent("GET", "/instance-availability")
    assert budget.wait(verda.FULL_READ) > 0  # not its turn yet
    assert budget.fits(verda.FULL_READ)  # but the bucket has room
    for _ in range(60):
        budget.sent("GET", "/instance-availability")
    assert not budget.fits(verda.FULL_READ)
    clock.now += 61 + planning.WINDOW_SLACK
    assert budget.fits(verda.FULL_READ)


def test_a_follow_up_trusts_the_room_the_provider_reports_over_our_stricter_count() -> None:
    """Our sliding windows, a second longer than Verda's, can be full while Verda's own window
    has room: a follow-up then goes where Verda reports room in every bucket it counts in."""
    clock = FakeClock()
    headroom = Headroom(clock=clock)
    budget = verda_budget(clock, headroom)
    for _ in range(58):
        budget.sent(*verda.FULL_READ[0])
    assert not budget.fits(verda.FULL_READ)  # nothing reported: our own count decides
    headroom.note("GET", "/instance-availability", '"project";r=300;t=20, "endpoint";r=5;t=20')
    assert budget.fits(verda.FULL_READ)
    # The controls: no room left on the path, or only the creates' reserve in the project.
    headroom.note("GET", "/instance-availability", '"project";r=300;t=20, "endpoint";r=1;t=20')
    assert not budget.fits(verda.FULL_READ)
    shared = f'"project";r={CREATE_RESERVE + 1};t=20, "endpoint";r=5;t=20'
    headroom.note("GET", "/instance-availability", shared)
    assert not budget.fits(verda.FULL_READ)
    assert budget.wait(verda.FULL_READ) > 0  # a planned read still keeps to our count


def test_a_follow_up_does_not_move_the_planned_turns() -> None:
    clock = FakeClock()
    budget = verda_budget(clock)
    h100 = verda.type_read("1H100.80S.30V")
    budget.sent(*verda.FULL_READ[0])
    clock.now += 0.5
    budget.sent(*h100[0])
    with budget.unplanned(verda.FULL_READ):  # H100 said true: where is it?
        budget.sent(*verda.FULL_READ[0])
    # The full list's turn is still about a period after its planned read, well before the
    # type's next one: the two paths' reads keep alternating.
    assert budget.wait(verda.FULL_READ) < budget.wait(h100) - 0.3
    # The control: counted as a planned read, it puts both turns at the same moment.
    clock = FakeClock()
    budget = verda_budget(clock)
    budget.sent(*verda.FULL_READ[0])
    clock.now += 0.5
    budget.sent(*h100[0])
    budget.sent(*verda.FULL_READ[0])
    assert budget.wait(verda.FULL_READ) == pytest.approx(budget.wait(h100), abs=0.02)


def test_what_the_provider_reports_left_slows_the_reads_before_a_429() -> None:
    clock = FakeClock()
    headroom = Headroom(clock=clock)
    budget = verda_budget(clock, headroom)
    budget.sent("GET", "/instance-availability/1H100.80S.30V")
    ours = budget.wait(verda.type_read("1H100.80S.30V"))
    # Another client of the same project has used most of it: 12 left for the next 30 s.
    headroom.note("GET", "/instance-availability", '"project";r=12;t=30, "endpoint";r=50;t=30')
    slowed = budget.wait(verda.type_read("1H100.80S.30V"))
    assert slowed == pytest.approx(30 / (12 - CREATE_RESERVE))
    assert slowed > ours
    headroom.note("GET", "/instance-availability", '"project";r=2;t=30, "endpoint";r=50;t=30')
    assert budget.wait(verda.FULL_READ) == pytest.approx(30)  # nothing to spare: the reset


def test_rates_show_each_bucket_limit_plan_and_use_per_minute() -> None:
    clock = FakeClock()
    budget = Budget(
        (RateLimit(3000, 900, "per IP", every_request("ip")),),
        create=("POST", "/deployments"),
        is_stock_read=lambda method, path: path == "/offers",
        clock=clock,
    )
    budget.sent("GET", "/offers")
    clock.now += 890  # nearly a window of history: what was sent is not extrapolated
    for _ in range(9):
        budget.sent("GET", "/offers")
    for _ in range(5):
        budget.sent("GET", "/deployments/1")
    limit, planned, used = budget.rates()["ip"]
    assert limit == 200  # 3,000 per 15 minutes
    assert used == pytest.approx(15 * 60 / 900)
    usable = 3000 - int(3000 * planning.CREATE_MARGIN_SHARE)
    reads = usable - math.ceil(usable * planning.OTHERS_SHARE)  # more than the 5 others need
    assert planned == pytest.approx((5 + reads) * 60 / (900 + planning.WINDOW_SLACK))
    # In its first window, a bucket counts the others at the rate they came: 5 in the first
    # 10 s are 451 a window, not 5; and room for their bursts is kept on top.
    fresh = Budget(
        budget.limits, create=budget.create, is_stock_read=budget.is_stock_read, clock=clock
    )
    fresh.sent("GET", "/offers")
    for _ in range(5):
        fresh.sent("GET", "/deployments/1")
    clock.now += 10
    span = 900 + planning.WINDOW_SLACK
    others = math.ceil(5 * span / 10)
    kept = others + math.ceil(2 * math.sqrt(others))
    assert fresh.rates()["ip"][1] == pytest.approx((5 + usable - kept) * 60 / span)


def test_what_is_left_is_the_tightest_read_bucket_reported_or_counted() -> None:
    clock = FakeClock()
    headroom = Headroom(clock=clock)
    budget = verda_budget(clock, headroom)
    assert budget.remaining() is None  # nothing read yet
    for _ in range(10):
        budget.sent(*verda.FULL_READ[0])
    assert budget.remaining() == 50  # counted: the path's 60 a minute, less 10
    headroom.note("GET", "/instance-availability", '"project";r=300;t=20, "endpoint";r=7;t=20')
    assert budget.remaining() == 7  # what Verda reports wins while its window lasts
    clock.now += 21
    assert budget.remaining() == 50  # its window is over: counted again
    clock.now += 40
    assert budget.remaining() == 60  # the reads have left the window
