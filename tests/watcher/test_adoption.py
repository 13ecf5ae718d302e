"""Which VM an unclear create made: the decision alone, with no provider and no database."""

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from app.core.catalogue import Provider
from app.providers.base import VM, VMState
from app.watcher.adoption import (
    Adopt,
    AttemptView,
    Decision,
    NotCreated,
    Wait,
    decide,
    possible_owners,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KIND = ("us-east-1", "l40s-x1")


def attempt(
    order: str, *, at: datetime = T0, kind: tuple[str, str] = KIND, status: str = "unknown"
) -> AttemptView:
    region, sku = kind
    return AttemptView(
        id=f"dep_{order}",
        order_id=f"ord_{order}",
        number=1,
        region=region,
        sku=sku,
        vm_name=f"ap-{order}-1",
        created_at=at,
        status=status,
    )


def listed_vm(
    vm_id: str,
    *,
    at: datetime | None = T0,
    kind: tuple[str | None, str | None] = KIND,
    state: VMState = VMState.PENDING,
) -> VM:
    """A QuantaCloud deployment as the adapter lists it: no name, no tag."""
    region, sku = kind
    return VM(Provider("quantacloud"), vm_id, state, "provisioning", region=region, sku=sku,
              created_at=at)  # fmt: skip


def named(vm_id: str, name: str) -> VM:
    """A Verda or Hyperstack VM, which carries the name its create was sent with."""
    return VM(Provider("hyperstack"), vm_id, VMState.PENDING, "BUILD", name=name)


def blind(
    a: AttemptView,
    found: list[VM],
    *,
    owned: Collection[str] = (),
    rivals: Collection[AttemptView] = (),
) -> Decision:
    """The decision at a provider whose VMs carry no name (QuantaCloud)."""
    return decide(a, found, owned=set(owned), rivals=list(rivals), finds_vms_by_name=False)


class TestProvidersWithoutNames:
    def test_the_one_unowned_vm_of_its_kind_is_adopted(self) -> None:
        a = attempt("a")
        vm = listed_vm("dep_1", at=T0 + timedelta(seconds=1))
        assert blind(a, [vm]) == Adopt(vm)

    def test_nothing_unowned_means_no_vm_came_of_the_create(self) -> None:
        a = attempt("a")
        assert blind(a, [listed_vm("dep_1")], owned={"dep_1"}) == NotCreated()
        assert blind(a, []) == NotCreated()
        gone = listed_vm("dep_2", state=VMState.GONE)
        assert blind(a, [gone]) == NotCreated()

    def test_a_vm_another_open_attempt_may_have_made_is_not_adopted(self) -> None:
        """The attack: B's create made dep_b and its answer is not in yet. A made nothing."""
        a = attempt("a")
        b = attempt("b", at=T0 + timedelta(seconds=3), status="creating")
        dep_b = listed_vm("dep_b", at=T0 + timedelta(seconds=3))
        decision = blind(a, [dep_b], rivals=[a, b])
        assert isinstance(decision, Wait)
        assert "ord_b" in decision.reason and "dep_b" in decision.reason
        # Positive control: once B's answer has recorded dep_b, A knows it made nothing.
        assert blind(a, [dep_b], owned={"dep_b"}, rivals=[a]) == NotCreated()

    def test_when_both_made_a_vm_the_first_waits_then_takes_the_one_left(self) -> None:
        a = attempt("a")
        b = attempt("b", at=T0 + timedelta(seconds=3), status="creating")
        dep_a = listed_vm("dep_a", at=T0)
        dep_b = listed_vm("dep_b", at=T0 + timedelta(seconds=3))
        assert isinstance(blind(a, [dep_b, dep_a], rivals=[b]), Wait)
        assert blind(a, [dep_b, dep_a], owned={"dep_b"}, rivals=[]) == Adopt(dep_a)

    def test_an_attempt_of_another_kind_does_not_compete_for_a_vm_whose_kind_is_listed(
        self,
    ) -> None:
        a = attempt("a")
        other = attempt("c", kind=("us-east-1", "h100-sxm-x8"), status="creating")
        vm = listed_vm("dep_1")
        assert blind(a, [vm], rivals=[other]) == Adopt(vm)

    def test_a_vm_whose_kind_is_not_listed_could_be_any_open_attempts(self) -> None:
        a = attempt("a")
        other = attempt("c", kind=("us-east-1", "h100-sxm-x8"), status="creating")
        vm = listed_vm("dep_1", kind=(None, None))
        assert isinstance(blind(a, [vm], rivals=[other]), Wait)
        assert blind(a, [vm], rivals=[]) == Adopt(vm)  # nobody else could have made it

    def test_vms_of_another_kind_or_made_before_the_attempt_are_not_candidates(self) -> None:
        a = attempt("a")
        other_kind = listed_vm("dep_1", kind=("us-east-1", "h100-sxm-x8"))
        other_region = listed_vm("dep_2", kind=("us-midwest-1", "l40s-x1"))
        older = listed_vm("dep_3", at=T0 - timedelta(minutes=5))
        assert blind(a, [other_kind, other_region, older]) == NotCreated()

    def test_an_attempt_that_began_after_a_vm_was_made_does_not_compete_for_it(self) -> None:
        a = attempt("a")
        later = attempt("b", at=T0 + timedelta(minutes=5), status="creating")
        vm = listed_vm("dep_1", at=T0 + timedelta(seconds=1))
        assert blind(a, [vm], rivals=[later]) == Adopt(vm)

    def test_of_several_unowned_vms_the_one_made_nearest_the_attempt_is_adopted(self) -> None:
        a = attempt("a")
        stray = listed_vm("dep_late", at=T0 - timedelta(seconds=40))
        mine = listed_vm("dep_mine", at=T0 + timedelta(seconds=1))
        assert blind(a, [stray, mine]) == Adopt(mine, (stray,))

    def test_three_unclear_creates_resolved_in_turn_each_get_their_own_vm(self) -> None:
        """Claims keep one open attempt per kind, so three unclear creates of one kind are
        resolved one after another; each finds the earlier ones' VMs owned."""
        vms = [listed_vm(f"dep_{i}", at=T0 + timedelta(seconds=10 * i)) for i in range(3)]
        owned: set[str] = set()
        for i in range(3):
            a = attempt(str(i), at=T0 + timedelta(seconds=10 * i))
            decision = blind(a, vms[: i + 1], owned=owned)
            assert decision == Adopt(vms[i])
            owned.add(vms[i].id)


class TestProvidersWithNames:
    def test_only_a_vm_with_the_attempts_own_name_is_adopted(self) -> None:
        a = attempt("a")
        mine = named("1", "ap-a-1")
        others = [named("2", "ap-b-1"), named("3", "ap-a-2")]
        decide_named = decide(a, [*others, mine], owned=set(), rivals=[], finds_vms_by_name=True)
        assert decide_named == Adopt(mine)
        assert decide(a, others, owned=set(), rivals=[], finds_vms_by_name=True) == NotCreated()

    def test_an_unnamed_vm_is_never_adopted_where_vms_have_names(self) -> None:
        rival = attempt("b", status="creating")
        unnamed = VM(Provider("verda"), "9", VMState.PENDING, "ordered")
        decision = decide(
            attempt("a"), [unnamed], owned=set(), rivals=[rival], finds_vms_by_name=True
        )
        assert decision == NotCreated()


def test_the_report_names_the_attempts_a_stray_vm_may_belong_to() -> None:
    vm = listed_vm("dep_1", at=T0 + timedelta(seconds=2))
    a = attempt("a")
    b = attempt("b", kind=("us-east-1", "h100-sxm-x8"))
    c = attempt("c", at=T0 + timedelta(minutes=5))
    assert possible_owners(vm, [a, b, c], finds_vms_by_name=False) == [a]
