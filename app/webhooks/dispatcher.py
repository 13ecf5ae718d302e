"""The dispatcher: takes due deliveries from the outbox and sends them, each on its own.

Runs on the replica that holds the watcher lease. Every delivery is its own task with its own
timeout, at most one at a time per endpoint (so one endpoint's events go out in order while
it answers), at most `webhook_max_in_flight_per_account` per account (taken in turns across
accounts) and at most MAX_IN_FLIGHT in all, so a slow receiver holds up only its own account.
"""

import asyncio
import contextlib
import logging
from collections import Counter
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.clock import utcnow
from app.services.webhooks import doorbell, outbox
from app.services.webhooks.outbox import Outcome
from app.settings import Settings
from app.storage.db import session_scope
from app.support.aio import wait_until_set
from app.support.metrics import WEBHOOK_ATTEMPTS
from app.support.secrets import SealedSecretError, SecretBoxLoader, SecretKeyError
from app.webhooks.chat import chat_body
from app.webhooks.sender import WebhookSender

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 128  # 32 accounts with every share taken; sends are mostly waiting sockets
LEASE_MARGIN_SECONDS = 15.0  # beyond the request timeout, before another dispatcher may resend


class Dispatcher:
    """Sends due webhook deliveries until stopped."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        read_sessionmaker: async_sessionmaker[AsyncSession],
        secret_boxes: SecretBoxLoader,
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.read_sessionmaker = read_sessionmaker
        self.secret_boxes = secret_boxes
        self.sender = WebhookSender(
            timeout_seconds=settings.webhook_timeout_seconds,
            connect_timeout_seconds=settings.webhook_connect_timeout_seconds,
            first_byte_timeout_seconds=settings.webhook_first_byte_timeout_seconds,
            allow_private=settings.allows_private_webhooks,
            refused_ports=settings.own_ports,
        )
        self.lease_seconds = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
        self.busy: set[str] = set()  # endpoints with a request out
        self.account_load: Counter[str] = Counter()  # requests out per account
        self.sending: set[asyncio.Task[None]] = set()
        self.wake = asyncio.Event()
        self.loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start looking for due deliveries (and listen for this process's new events)."""
        doorbell.listen(self.wake)
        self.loop_task = asyncio.create_task(self._run(), name="webhook dispatcher")

    async def stop(self) -> None:
        """Stop; requests out get until their timeout, the rest resume from the outbox later."""
        doorbell.stop_listening(self.wake)
        if self.loop_task is not None:
            self.loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.loop_task
        if self.sending:
            await asyncio.wait(self.sending, timeout=self.settings.webhook_timeout_seconds + 1)
        for task in self.sending:
            task.cancel()
        await self.sender.aclose()

    async def _run(self) -> None:
        while True:
            self.wake.clear()
            try:
                await self.dispatch_due()
            except Exception:
                log.exception("looking for due webhook deliveries failed; trying again")
            await wait_until_set(self.wake, self.settings.webhook_poll_seconds)

    async def dispatch_due(self) -> int:
        """Lease what is due and start sending it; returns how many were started."""
        free = MAX_IN_FLIGHT - len(self.sending)
        if free <= 0:
            return 0
        # Looking is a read: on SQLite, a write transaction every poll would take the one
        # write lock from the watcher's claims for nothing.
        async with session_scope(self.read_sessionmaker) as session:
            due = await outbox.due(
                session,
                now=utcnow(),
                busy_endpoints=self.busy,
                account_load=self.account_load,
                per_account=self.settings.webhook_max_in_flight_per_account,
                limit=free,
            )
        if not due:
            return 0
        async with session_scope(self.sessionmaker) as session:
            claimed = await outbox.claim(
                session, delivery_ids=due, now=utcnow(), lease_seconds=self.lease_seconds
            )
        for claim in claimed:
            self.busy.add(claim.endpoint_id)
            self.account_load[claim.account_id] += 1
            task = asyncio.create_task(self._deliver(claim), name=f"webhook {claim.delivery_id}")
            self.sending.add(task)
            task.add_done_callback(self.sending.discard)
        return len(claimed)

    async def _deliver(self, claim: outbox.Claimed) -> None:
        try:
            try:
                outcome = await self._send(claim)
            except Exception as exc:
                # Still an attempt: recorded and retried on the schedule, never left pending.
                log.exception("sending webhook delivery %s failed", claim.delivery_id)
                outcome = Outcome(
                    status_code=None,
                    duration_ms=0,
                    error=f"the delivery could not be sent ({type(exc).__name__})",
                )
            WEBHOOK_ATTEMPTS.labels(result="delivered" if outcome.succeeded else "failed").inc()
            async with session_scope(self.sessionmaker) as session:
                await outbox.record_attempt(
                    session,
                    claim=claim,
                    outcome=outcome,
                    now=utcnow(),
                    schedule=self.settings.webhook_retry_schedule,
                    disable_after=timedelta(hours=self.settings.webhook_disable_after_hours),
                )
        except Exception:
            log.exception(
                "recording webhook delivery %s failed; its lease will run out and it is sent again",
                claim.delivery_id,
            )
        finally:
            self.busy.discard(claim.endpoint_id)
            self.account_load[claim.account_id] -= 1
            if self.account_load[claim.account_id] <= 0:
                del self.account_load[claim.account_id]
            self.wake.set()  # the endpoint's next delivery may go now

    async def _send(self, claim: outbox.Claimed) -> Outcome:
        try:
            box = self.secret_boxes.get()
            secrets = [box.open(claim.endpoint_id, claim.secret)]
            if claim.previous_secret is not None:
                secrets.append(box.open(claim.endpoint_id, claim.previous_secret))
        except (SealedSecretError, SecretKeyError, OSError) as exc:
            return Outcome(status_code=None, duration_ms=0, error=str(exc))
        public_url = str(self.settings.public_url) if self.settings.public_url else None
        body = chat_body(claim.format, claim.payload, public_url=public_url)
        return await self.sender.send(
            claim.url, msg_id=claim.event_id, payload=body, secrets=secrets
        )
