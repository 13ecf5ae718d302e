"""Periodic jobs: only their registration lives here; each calls one service function."""

import logging
from datetime import timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db import session_scope
from app.dbtypes import utcnow
from app.services import idempotency, outbox, published_events

logger = logging.getLogger(__name__)
PRUNE_IDEMPOTENCY_KEYS_SECONDS = 3600
PRUNE_WEBHOOK_EVENTS_SECONDS = 3600
WEBHOOK_HISTORY_DAYS = 30
EVENT_HISTORY_DAYS = 30


async def prune_idempotency_keys(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete Idempotency-Key records older than 24 hours."""
    async with session_scope(sessionmaker) as session:
        pruned = await idempotency.prune_expired(session, now=utcnow())
    if pruned:
        logger.info("pruned %d expired idempotency keys", pruned)
    return pruned


async def prune_webhook_events(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete delivered (or given-up) webhook events older than 30 days, with their attempts."""
    async with session_scope(sessionmaker) as session:
        pruned = await outbox.prune(
            session, older_than=utcnow() - timedelta(days=WEBHOOK_HISTORY_DAYS)
        )
    if pruned:
        logger.info("pruned %d webhook events older than %d days", pruned, WEBHOOK_HISTORY_DAYS)
    return pruned


async def prune_published_events(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete stream events published more than 30 days ago (the timelines keep their lines)."""
    async with session_scope(sessionmaker) as session:
        pruned = await published_events.prune(
            session, older_than=utcnow() - timedelta(days=EVENT_HISTORY_DAYS)
        )
    if pruned:
        logger.info("pruned %d stream events older than %d days", pruned, EVENT_HISTORY_DAYS)
    return pruned


def create_scheduler(sessionmaker: async_sessionmaker[AsyncSession]) -> AsyncIOScheduler:
    """The scheduler with every periodic job registered (not started)."""
    scheduler = AsyncIOScheduler(timezone="UTC")
    jobs = [
        (prune_idempotency_keys, PRUNE_IDEMPOTENCY_KEYS_SECONDS),
        (prune_webhook_events, PRUNE_WEBHOOK_EVENTS_SECONDS),
        (prune_published_events, PRUNE_WEBHOOK_EVENTS_SECONDS),
    ]
    for job, seconds in jobs:
        scheduler.add_job(
            job,
            "interval",
            seconds=seconds,
            args=[sessionmaker],
            id=job.__name__,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=60,
            replace_existing=True,
        )
    return scheduler
