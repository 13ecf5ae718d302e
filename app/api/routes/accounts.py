"""Accounts and credits (admin) and the caller's own balance and ledger."""

from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.deps import AdminOnly, CurrentAccount, SessionDep, SettingsDep
from app.api.idempotent import IdempotencyKeyHeader, respond_once
from app.api.pagination import PageRequest, paged
from app.api.params import PathId
from app.api.schemas import (
    AccountCreate,
    AccountCreated,
    AccountOut,
    AdminAccountOut,
    CreditCreate,
    LedgerEntryOut,
    Page,
)
from app.api.strict_json import StrictJsonRoute
from app.api.webhook_schemas import AccountEventOut
from app.core.errors import Forbidden, field_error
from app.core.money import format_usd
from app.services import account_events, accounts, billing, ledger

ADMIN_PRINCIPAL = "admin"  # whose Idempotency-Keys admin requests use
DEMO_TOP_UP_MAX = Decimal("1000.00")  # play money an account may add itself at a time
admin_router = APIRouter(
    route_class=StrictJsonRoute, prefix="/v1/accounts", tags=["admin"], dependencies=[AdminOnly]
)
account_router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/account", tags=["account"])


@admin_router.post("", status_code=201)
async def create_account(body: AccountCreate, session: SessionDep) -> AccountCreated:
    """Create an account; its API key is in this response and nowhere else."""
    account, api_key = await accounts.create_account(session, name=body.name)
    return AccountCreated(
        id=account.id, name=account.name, api_key=api_key, created_at=account.created_at
    )


@admin_router.get("")
async def list_accounts(
    session: SessionDep,
    settings: SettingsDep,
    page: Annotated[PageRequest, paged("acct")],
) -> Page[AdminAccountOut]:
    """Every account, newest first: its balance, what is held, what its machines cost an hour
    and how many it has running."""
    found = await accounts.list_accounts(session, cursor=page.cursor, limit=page.fetch)
    machines = await billing.machines_by_account(session, account_ids=[a.id for a in found])
    shown = []
    for account in found:
        count, spend = machines.get(account.id, (0, Decimal(0)))
        out = AdminAccountOut.present(
            account,
            hourly_spend=spend,
            low_balance_hours=settings.low_balance_hours,
            billing_hour_seconds=settings.billing_hour_seconds,
        )
        shown.append(out.model_copy(update={"machines": count}))
    return page.page_of(shown, AdminAccountOut)


@admin_router.post("/{account_id}/credits", status_code=201, response_model=LedgerEntryOut)
async def add_credit(
    account_id: PathId,
    body: CreditCreate,
    request: Request,
    session: SessionDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    """Top up an account's balance (send an Idempotency-Key to make retries safe)."""
    return await _credit(
        request, session, account_id, body, principal=ADMIN_PRINCIPAL, key=idempotency_key
    )


async def _credit(
    request: Request,
    session: SessionDep,
    account_id: str,
    body: CreditCreate,
    *,
    principal: str,
    key: str | None,
    note: str | None = None,
) -> JSONResponse:
    """Credit `account_id` once per Idempotency-Key of `principal`: the admin's credit and a
    demo account's own top-up alike."""

    async def top_up() -> LedgerEntryOut:
        entry = await ledger.credit(
            session, account_id=account_id, amount=body.amount, note=body.note or note
        )
        return LedgerEntryOut.model_validate(entry)

    return await respond_once(
        request, session, principal=principal, key=key, body=body, status_code=201, action=top_up
    )


@account_router.get("")
async def get_account(
    account: CurrentAccount, session: SessionDep, settings: SettingsDep
) -> AccountOut:
    """The caller's balance, what is held for creates in flight, what is available, what its
    machines cost an hour together and how long the available balance pays them."""
    spend = await billing.spend_by_account(session, account_ids=[account.id])
    return AccountOut.present(
        account,
        hourly_spend=spend.get(account.id, Decimal(0)),
        low_balance_hours=settings.low_balance_hours,
        billing_hour_seconds=settings.billing_hour_seconds,
        can_top_up=settings.mode == "demo",
    )


@account_router.post("/credits", status_code=201, response_model=LedgerEntryOut)
async def add_demo_credit(
    account: CurrentAccount,
    body: CreditCreate,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    """Demo mode only: add play money to the caller's own balance, at most $1,000.00 a time
    (send an Idempotency-Key to make retries safe). In live mode top-ups are the operator's."""
    if settings.mode != "demo":
        raise Forbidden(
            "top-ups are the operator's in live mode (POST /v1/accounts/{id}/credits with the "
            "admin key); only demo mode's play money can be added by the account itself",
            code="demo_only",
        )
    if body.amount > DEMO_TOP_UP_MAX:
        raise field_error("amount", f"a demo top-up is at most {format_usd(DEMO_TOP_UP_MAX)}")
    return await _credit(
        request,
        session,
        account.id,
        body,
        principal=account.id,
        key=idempotency_key,
        note="demo top-up",
    )


@account_router.get("/ledger")
async def get_ledger(
    account: CurrentAccount,
    session: SessionDep,
    page: Annotated[PageRequest, paged("led")],
) -> Page[LedgerEntryOut]:
    """Every movement of money on the caller's account, newest first."""
    entries = await ledger.list_entries(
        session, account_id=account.id, cursor=page.cursor, limit=page.fetch
    )
    return page.page_of(entries, LedgerEntryOut)


@account_router.get("/events")
async def get_account_events(
    account: CurrentAccount,
    session: SessionDep,
    page: Annotated[PageRequest, paged("aev")],
) -> Page[AccountEventOut]:
    """What happened to the account outside any order (an endpoint disabled), newest first."""
    events = await account_events.list_events(
        session, account_id=account.id, cursor=page.cursor, limit=page.fetch
    )
    return page.page_of(events, AccountEventOut)
