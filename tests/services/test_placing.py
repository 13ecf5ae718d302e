"""Placing at the service layer, both databases: an order by model is expanded by placing itself
(its alternatives and its serve script), and the preview is what placing would make."""

from decimal import Decimal

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.errors import ValidationFailed
from app.open_models.catalogue import shipped
from app.services import accounts, placing
from app.services.order_request import ModelOrder, NewOrder
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import OrderEvent
from app.support.secrets import SecretBox
from tests.fixtures.settings import SECRET_KEY

ALL = {"verda", "hyperstack", "quantacloud"}
KIMI = next(m for m in shipped() if m.id == "moonshotai/Kimi-K3")


def by_model(**changes: object) -> NewOrder:
    """Kimi K3 at Verda, up to $70/h, served by vLLM unless `changes` say otherwise."""
    order = ModelOrder(
        model=KIMI, providers=["verda"], max_price_per_hour=Decimal(70), min_cache_gb=0
    )
    fields: dict[str, object] = {"model": KIMI.id, "by_model": order, "serve_engine": "vllm"}
    return NewOrder(alternatives=(), **(fields | changes))  # type: ignore[arg-type]


async def test_an_order_by_model_is_placed_as_its_preview_shows_it(engine: AsyncEngine) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        previewed = await placing.preview(session, by_model())
        account, _key = await accounts.create_account(session, name="placing")
        order = await placing.place_order(
            session,
            account_id=account.id,
            request=by_model(),
            enabled=ALL,
            max_waiting=10,
            box=SecretBox([SECRET_KEY]),
        )
    shown = [a.stored() for a in previewed.request.alternatives]
    assert shown and order.alternatives == shown
    assert all(a["gpu_count"] == 8 for a in shown)  # Kimi K3 needs 8-GPU machines or more
    script = previewed.request.startup_script
    assert script is not None and "vllm" in script
    assert order.startup_script_bytes == len(script.encode())
    assert order.serve_engine == "vllm"


async def test_an_order_by_model_without_serve_has_no_script(engine: AsyncEngine) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        previewed = await placing.preview(session, by_model(serve_engine=None))
    assert previewed.request.alternatives  # the control: it was expanded
    assert previewed.request.startup_script is None


async def test_serve_and_a_script_of_ones_own_are_refused_naming_the_script(
    engine: AsyncEngine,
) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        with pytest.raises(ValidationFailed) as refused:
            await placing.preview(session, by_model(startup_script="echo mine\n"))
    assert refused.value.details == [
        {"field": "startup_script", "message": "serve writes the start-up script: give one of them"}
    ]


@pytest.mark.parametrize(
    ("reports", "serve_engine"), [(False, "vllm"), (True, "vllm"), (False, None)]
)
async def test_a_serving_order_says_when_its_machine_cannot_report_to_us(
    engine: AsyncEngine, reports: bool, serve_engine: str | None
) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="placing")
        order = await placing.place_order(
            session,
            account_id=account.id,
            request=by_model(serve_engine=serve_engine),
            enabled=ALL,
            max_waiting=10,
            box=SecretBox([SECRET_KEY]),
            reports=reports,
        )
        kinds = (
            await session.scalars(select(OrderEvent.kind).where(OrderEvent.order_id == order.id))
        ).all()
    # Only an order serving a model, placed where machines cannot report, is told so; the
    # other two are the controls.
    assert ("no_reports" in kinds) == (serve_engine is not None and not reports)
    assert "placed" in kinds
