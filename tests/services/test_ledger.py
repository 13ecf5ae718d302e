"""The ledger: top-ups, holds, releases and debits keep `available` at or above zero."""

import asyncio
from decimal import Decimal

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import Conflict, InsufficientFunds, NotFound
from app.core.states import HoldStatus, LedgerKind
from app.services import accounts, ledger
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Account, Hold, LedgerEntry


async def _new_account(engine: AsyncEngine, credit: str | None = None) -> str:
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="Ledger test")
        if credit is not None:
            await ledger.credit(session, account_id=account.id, amount=Decimal(credit))
        return account.id


async def _account(engine: AsyncEngine, account_id: str) -> Account:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await accounts.get_account(session, account_id=account_id)


async def test_a_top_up_raises_balance_and_is_recorded(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine)
    async with session_scope(create_sessionmaker(engine)) as session:
        entry = await ledger.credit(
            session, account_id=account_id, amount=Decimal("100.00"), note="wire 42"
        )
    assert (entry.kind, entry.amount, entry.balance_after, entry.note) == (
        LedgerKind.TOPUP,
        Decimal("100.00"),
        Decimal("100.00"),
        "wire 42",
    )
    account = await _account(engine, account_id)
    assert (account.balance, account.held) == (Decimal("100.00"), Decimal(0))


async def test_a_hold_reserves_balance_and_a_release_gives_it_back(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine, credit="100")
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        hold = await ledger.place_hold(session, account_id=account_id, amount=Decimal("46.10"))
    account = await _account(engine, account_id)
    assert (account.balance, account.held) == (Decimal("100"), Decimal("46.10"))
    async with session_scope(maker) as session:
        entry = await ledger.release_hold(session, hold_id=hold.id)
    assert entry.kind == LedgerKind.HOLD_RELEASE and entry.held_after == 0
    account = await _account(engine, account_id)
    assert (account.balance, account.held) == (Decimal("100"), Decimal(0))


async def test_a_debit_spends_the_hold_and_frees_what_was_not_spent(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine, credit="100")
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        hold = await ledger.place_hold(session, account_id=account_id, amount=Decimal("50"))
    async with session_scope(maker) as session:
        entry = await ledger.debit_hold(session, hold_id=hold.id, amount=Decimal("46.10"))
    assert (entry.kind, entry.amount) == (LedgerKind.DEBIT, Decimal("46.10"))
    account = await _account(engine, account_id)
    assert (account.balance, account.held) == (Decimal("53.90"), Decimal(0))
    async with session_scope(maker) as session:
        stored = await session.get(Hold, hold.id)
        assert stored is not None and stored.status == HoldStatus.DEBITED


async def test_a_hold_beyond_the_available_balance_is_refused(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine, credit="40")
    with pytest.raises(InsufficientFunds):
        async with session_scope(create_sessionmaker(engine)) as session:
            await ledger.place_hold(session, account_id=account_id, amount=Decimal("40.01"))
    account = await _account(engine, account_id)
    assert account.held == 0


async def test_a_hold_on_a_missing_account_is_not_found(engine: AsyncEngine) -> None:
    with pytest.raises(NotFound):
        async with session_scope(create_sessionmaker(engine)) as session:
            await ledger.place_hold(session, account_id="acct_missing", amount=Decimal("1"))


async def test_a_hold_closes_once(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine, credit="100")
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        hold = await ledger.place_hold(session, account_id=account_id, amount=Decimal("10"))
    async with session_scope(maker) as session:
        await ledger.release_hold(session, hold_id=hold.id)
    with pytest.raises(Conflict):
        async with session_scope(maker) as session:
            await ledger.debit_hold(session, hold_id=hold.id)
    account = await _account(engine, account_id)
    assert (account.balance, account.held) == (Decimal("100"), Decimal(0))


async def test_the_database_refuses_a_negative_available_balance(engine: AsyncEngine) -> None:
    account_id = await _new_account(engine, credit="10")
    with pytest.raises(IntegrityError):
        async with session_scope(create_sessionmaker(engine)) as session:
            await session.execute(
                text("UPDATE accounts SET held = balance + 1 WHERE id = :id"), {"id": account_id}
            )


async def test_concurrent_holds_never_overdraw(engine: AsyncEngine) -> None:
    """Twenty creates racing for one account that can pay for five: exactly five get a hold."""
    account_id = await _new_account(engine, credit="230.50")
    maker = create_sessionmaker(engine)
    price = Decimal("46.10")

    async def try_hold() -> bool:
        try:
            async with session_scope(maker) as session:
                await ledger.place_hold(session, account_id=account_id, amount=price)
                await asyncio.sleep(0.01)  # keep the transaction open while others race
            return True
        except InsufficientFunds:
            return False

    results = await asyncio.gather(*(try_hold() for _ in range(20)))
    assert results.count(True) == 5
    account = await _account(engine, account_id)
    assert account.held == price * 5
    assert account.balance - account.held == Decimal("0.00")


async def test_concurrent_holds_releases_and_debits_keep_the_books_consistent(
    engine: AsyncEngine,
) -> None:
    account_id = await _new_account(engine, credit="100")
    maker = create_sessionmaker(engine)

    async def hold_then_settle(index: int) -> None:
        try:
            async with session_scope(maker) as session:
                hold = await ledger.place_hold(session, account_id=account_id, amount=Decimal("7"))
        except InsufficientFunds:
            return
        async with session_scope(maker) as session:
            if index % 2:
                await ledger.debit_hold(session, hold_id=hold.id, amount=Decimal("6.50"))
            else:
                await ledger.release_hold(session, hold_id=hold.id)

    await asyncio.gather(*(hold_then_settle(i) for i in range(30)))
    async with session_scope(maker) as session:
        account = await accounts.get_account(session, account_id=account_id)
        entries = list(
            (
                await session.execute(
                    select(LedgerEntry).where(LedgerEntry.account_id == account_id)
                )
            ).scalars()
        )
        open_holds = await session.scalar(
            select(func.count()).select_from(Hold).where(Hold.status == HoldStatus.OPEN)
        )
    topups = sum((e.amount for e in entries if e.kind == LedgerKind.TOPUP), Decimal(0))
    debits = sum((e.amount for e in entries if e.kind == LedgerKind.DEBIT), Decimal(0))
    assert account.balance == topups - debits
    assert account.held == 0 and open_holds == 0
    assert account.balance >= 0
    assert all(e.balance_after - e.held_after >= 0 for e in entries)
