"""Claims (one commit for a whole pass) and the create calls that follow them."""

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from app.core.catalogue import Provider
from app.core.errors import InsufficientFunds
from app.core.market import OfferKey
from app.core.states import OrderEventKind
from app.core.text import quote
from app.providers.base import (
    AuthFailed,
    NoCapacity,
    OutcomeUnknown,
    ProviderOutOfFunds,
    RateLimited,
    Refused,
    Rejected,
    Unavailable,
    urgent,
)
from app.providers.registry import display_name, spec_for, vm_named
from app.services import attempts, claims, machine_reports, startup_scripts, timeline
from app.services.attempts import VMAlreadyOwned
from app.services.claims import Intent, KindBusy
from app.services.timeline import Line
from app.storage.db import session_scope
from app.storage.one_hop import OneHopWriter
from app.support.metrics import CREATES
from app.support.secrets import SealedSecretError, SecretBoxLoader, SecretKeyError
from app.watcher.book import OfferBook, Taken
from app.watcher.context import WatcherContext
from app.watcher.match import Assignment
from app.watcher.scripts import delete_startup_script

log = logging.getLogger(__name__)
RATE_LIMIT_PAUSE_SECONDS = 5.0
SAID_QUOTE = 150  # characters of a provider's own words on a timeline


def answered(refused: Refused) -> str:
    """What the provider answered, for a timeline: status, its code, its message (quoted)."""
    return ", ".join(
        (
            str(refused.status_code) if refused.status_code is not None else "no status",
            quote(refused.reason) if refused.reason else "no code",
            quote(refused.said, SAID_QUOTE) if refused.said else "no message",
        )
    )


class Deployer:
    """Turns assignments into committed intents, then into create calls and their outcomes."""

    def __init__(
        self,
        context: WatcherContext,
        *,
        book: OfferBook,
        on_settled: Callable[[], None],
        pause_provider: Callable[[Provider, float], None],
        on_outcome: Callable[[Provider], None] = lambda _provider: None,
        billing_hour_seconds: float = claims.DEFAULT_HOUR_SECONDS,
        secret_boxes: SecretBoxLoader | None = None,
        report_url: str | None = None,
    ) -> None:
        self.context = context
        self.secret_boxes = secret_boxes  # opens orders' start-up scripts
        # Where machines report their stages (None: they cannot reach this service).
        self.report_url = report_url
        self.writer = OneHopWriter(context.sessionmaker)
        self.book = book
        self.on_settled = on_settled
        self.pause_provider = pause_provider
        self.on_outcome = on_outcome  # a create at this provider has its answer (or none)
        self.billing_hour_seconds = billing_hour_seconds
        self.in_flight: set[asyncio.Task[None]] = set()
        self.in_flight_ids: set[str] = set()  # deployment ids whose create is being sent
        # Offer keys of creates in flight at providers that cannot name VMs (one per kind).
        self.serial_in_flight: dict[str, OfferKey] = {}

    async def claim(self, assignments: list[Assignment]) -> tuple[list[Intent], set[str]]:
        """Claim every assigned order, all in one commit (in one hop on SQLite).

        Returns the intents, and the ids of orders that turned out not to be waiting any more.
        """
        wanted = [(a.order_id, a.offer, a.price_with_fees, a.alternative) for a in assignments]
        try:
            return await self.writer.run(
                functools.partial(
                    claims.claim_all,
                    claims=wanted,
                    billing_hour_seconds=self.billing_hour_seconds,
                )
            )
        except (InsufficientFunds, KindBusy):
            return [], set()  # the next pass notes it, or waits for the open attempt

    def close(self) -> None:
        """Release the claims' own connection (after `drain`)."""
        self.writer.close()

    async def write_notes(self, notes: list[Line]) -> None:
        """Write "why still waiting" notes to the orders' timelines, in one commit."""
        async with session_scope(self.context.sessionmaker) as session:
            await timeline.write(session, *notes)

    def launch(self, intent: Intent, taken: Taken) -> None:
        """Send the create in the background; creates for different orders go out together."""
        task = asyncio.create_task(self.send(intent, taken), name=f"create {intent.attempt_id}")
        self.in_flight.add(task)
        self.in_flight_ids.add(intent.attempt_id)
        if not spec_for(intent.offer.provider).finds_vms_by_name:
            self.serial_in_flight[intent.attempt_id] = intent.offer.key

        def done(finished: asyncio.Task[None]) -> None:
            self.in_flight.discard(finished)
            self.in_flight_ids.discard(intent.attempt_id)
            self.serial_in_flight.pop(intent.attempt_id, None)

        task.add_done_callback(done)

    async def send(self, intent: Intent, taken: Taken) -> None:
        """One create call and the one commit that records what came of it."""
        consumed = False  # whether the create may have used the unit of stock
        offer = intent.offer
        provider = offer.provider
        adapter = self.context.adapters[provider]
        try:
            script = self._script(intent)
        except (SealedSecretError, SecretKeyError) as exc:
            log.error("the start-up script of %s cannot be opened: %s", intent.order_id, exc)
            await self._not_created(
                intent,
                OrderEventKind.REJECTED,
                "The start-up script cannot be decrypted with this service's keys "
                "(AUTOPROVISION_SECRET_KEY changed?): nothing sent; the order cannot succeed.",
                fail_order=True,
            )
            self.book.answered(taken, consumed=False)
            self.on_settled()
            return
        try:
            with urgent():  # the look-ups a create needs go before stock reads
                vm = await adapter.create_vm(
                    offer,
                    name=intent.vm_name,
                    tag=intent.tag,
                    ssh_public_key=intent.ssh_public_key,
                    disk_gb=intent.disk_gb,
                    startup_script=script,
                    image=intent.image,
                )
        except NoCapacity as exc:
            self.book.cool(offer.key, exc.retry_after)
            await self._not_created(
                intent,
                OrderEventKind.NO_CAPACITY,
                "Stock gone before the create (someone else got it first): keeps waiting.",
            )
        except RateLimited as exc:
            self.pause_provider(provider, exc.retry_after or RATE_LIMIT_PAUSE_SECONDS)
            await self._not_created(
                intent,
                OrderEventKind.RATE_LIMITED,
                f"{display_name(provider)} asked us to slow down before the create: keeps waiting.",
            )
        except ProviderOutOfFunds:
            self.book.cool(offer.key)
            await self._not_created(
                intent,
                OrderEventKind.PROVIDER_FUNDS,
                f"Our account at {display_name(provider)} cannot pay for this machine right "
                "now: keeps waiting.",
            )
        except AuthFailed:
            log.error("%s refused our credentials on a create", display_name(provider))
            await self._not_created(
                intent,
                OrderEventKind.PROVIDER_AUTH,
                f"{display_name(provider)} refused our credentials: keeps waiting.",
            )
        except Unavailable as exc:
            await self._not_created(
                intent,
                OrderEventKind.PROVIDER_UNAVAILABLE,
                f"Nothing sent ({exc.message}): keeps waiting.",
            )
        except Refused as exc:
            rest = self.book.refused(offer.key)
            await self._not_created(
                intent,
                OrderEventKind.REFUSED,
                f"{display_name(provider)} refused the create ({answered(exc)}) without saying "
                f"what in the request was wrong: keeps waiting; this offer rests {rest:g} s.",
            )
        except Rejected as exc:
            await self._not_created(
                intent,
                OrderEventKind.REJECTED,
                f"{display_name(provider)} refused the request itself ({exc.message}): "
                "the order cannot succeed.",
                fail_order=True,
            )
        except OutcomeUnknown as exc:
            consumed = True
            await self._unknown(
                intent, f"No clear answer from {display_name(provider)} ({exc.message})"
            )
        except Exception:
            consumed = True
            log.exception("create for %s crashed; its VM may exist", intent.order_id)
            await self._unknown(intent, f"The create to {display_name(provider)} broke off")
        else:
            consumed = True
            self.book.accepted(offer.key)
            CREATES.labels(str(provider), "created").inc()
            async with session_scope(self.context.sessionmaker) as session:
                try:
                    await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
                except VMAlreadyOwned:
                    # Only a wrong adoption elsewhere could get here; the VM stays with its
                    # owner and this attempt is looked up like any unclear create.
                    log.error("%s answered %s with VM %s, owned already", provider, intent, vm.id)
                    await attempts.mark_unknown(
                        session,
                        attempt_id=intent.attempt_id,
                        message=f"{display_name(provider)} answered with {vm_named(vm.id)}, which "
                        "another order already owns",
                    )
        finally:
            self.book.answered(taken, consumed=consumed)
        self.on_settled()
        self.on_outcome(provider)
        if script is not None and not consumed:  # no VM came of it: nor may its script stay
            await delete_startup_script(adapter, intent.vm_name)

    def _script(self, intent: Intent) -> str | None:
        """The order's start-up script, opened (None when it has none), with where and how its
        machine reports when it is a shell script and machines can reach this service."""
        if intent.sealed_startup_script is None:
            return None
        if self.secret_boxes is None:
            raise SecretKeyError("no secret key is configured to open start-up scripts")
        box = self.secret_boxes.get()
        script = startup_scripts.open_sealed(box, intent.order_id, intent.sealed_startup_script)
        if self.report_url is None or intent.report_token is None:
            return script
        url, token = self.report_url, intent.report_token
        reporting = machine_reports.with_report_channel(script, url, token)
        return script if reporting is None else reporting

    async def _not_created(
        self, intent: Intent, kind: OrderEventKind, message: str, *, fail_order: bool = False
    ) -> None:
        CREATES.labels(str(intent.offer.provider), kind).inc()
        async with session_scope(self.context.sessionmaker) as session:
            await attempts.settle_not_created(
                session,
                attempt_id=intent.attempt_id,
                kind=kind,
                message=message,
                fail_order=fail_order,
            )

    async def _unknown(self, intent: Intent, message: str) -> None:
        CREATES.labels(str(intent.offer.provider), "unknown").inc()
        async with session_scope(self.context.sessionmaker) as session:
            await attempts.mark_unknown(session, attempt_id=intent.attempt_id, message=message)

    async def drain(self, timeout: float) -> None:
        """Wait (bounded) for creates in flight to get their answers."""
        if self.in_flight:
            started = time.monotonic()
            await asyncio.wait(set(self.in_flight), timeout=timeout)
            log.info("drained creates in %.1fs", time.monotonic() - started)
