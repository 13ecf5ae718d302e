"""What must hold for an account's orders after the service was killed mid-deploy and
restarted, read from its database and its API: the crash tests' common checks."""

from decimal import Decimal

import httpx
from sqlalchemy import select

from app.core.states import HoldStatus, LedgerKind
from app.storage.models import Attempt, Hold, LedgerEntry, Order
from tests.factories import ADMIN
from tests.processes import query


class CrashAccount:
    """One account made through a service's API, topped up with `credit`."""

    def __init__(self, api: httpx.Client, credit: Decimal) -> None:
        self.api = api
        self.credit = credit
        account = api.post("/v1/accounts", json={"name": "crash"}, headers=ADMIN).json()
        self.id: str = account["id"]
        self.headers = {"Authorization": f"Bearer {account['api_key']}"}
        api.post(f"/v1/accounts/{self.id}/credits", json={"amount": str(credit)}, headers=ADMIN)

    def check_paid_once(self, database_url: str, order_ids: list[str]) -> None:
        """Each order deployed or running with one debit; no open hold; no attempt left
        `creating` or `unknown`; the balance is the credit less the debits, nothing held."""
        statuses = dict(
            query(database_url, select(Order.id, Order.status).where(Order.id.in_(order_ids)))
        )
        assert set(statuses.values()) <= {"deployed", "running"}, statuses
        entries = query(
            database_url,
            select(LedgerEntry.order_id, LedgerEntry.kind, LedgerEntry.amount).where(
                LedgerEntry.account_id == self.id
            ),
        )
        for order_id in order_ids:
            debits = [e for e in entries if e.order_id == order_id and e.kind == LedgerKind.DEBIT]
            assert len(debits) == 1, f"{order_id}: {len(debits)} debits"
        open_holds = query(
            database_url,
            select(Hold.id).where(Hold.account_id == self.id, Hold.status == HoldStatus.OPEN),
        )
        assert open_holds == []
        attempts = query(
            database_url, select(Attempt.status).where(Attempt.order_id.in_(order_ids))
        )
        assert not {"creating", "unknown"} & {row.status for row in attempts}
        spent = sum((e.amount for e in entries if e.kind == LedgerKind.DEBIT), Decimal(0))
        balance = self.api.get("/v1/account", headers=self.headers).json()
        assert Decimal(balance["balance"]) == self.credit - spent
        assert Decimal(balance["held"]) == 0
