"""The orders table at common screen widths: with long names that have no break points (order
ids, `snake_case`), many alternatives and clusters, every waiting order's Cancel and every running
order's Terminate is on the screen without scrolling sideways."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from app.simulators.control import SimControlSync
from tests.dashboard.pages import SLOW, row, sign_in
from tests.dashboard.service import Api
from tests.waiting import eventually_sync

HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")
H100 = {"gpu_model": "H100", "gpu_count": 1, "max_price_per_hour": "3.00"}
SNAKE = "a_training_run_for_the_kimi_k3_finetune_with_the_long_context_mixture_of_experts_ab"


def placed_orders(api: Api, sim_sync: SimControlSync) -> dict[str, str]:
    """Two running machines and waiting orders of every awkward kind; each id and its button."""
    running = [api.place(**H100, providers=["hyperstack"])["id"] for _ in range(2)]
    sim_sync.stock(*HYPER_H100, 2)
    eventually_sync(
        lambda: all(api.order(o)["status"] == "running" for o in running), seconds=SLOW / 1000
    )
    bodies: list[dict[str, Any]] = [
        *({**H100, "providers": ["verda", "hyperstack", "quantacloud"]} for _ in range(4)),
        *({**H100, "name": f"{SNAKE}{n}", "providers": ["verda"]} for n in range(3)),
        {
            "name": f"{SNAKE}_alternatives",
            "alternatives": [
                {**H100, "gpu_model": model, "gpu_count": 8, "providers": ["verda", "hyperstack"]}
                for model in ("H100", "H200", "B200", "B300", "GH200", "A100-80G")
            ],
        },
        {**H100, "nodes": 2, "providers": ["hyperstack"], "max_price_per_hour": "6.00"},
        {
            "gpu_model": "H200",
            "gpu_count": 8,
            "nodes": 2,
            "providers": ["verda"],
            "max_price_per_hour": "30.00",
            "name": f"{SNAKE}_cluster",
        },
    ]
    waiting = [api.place(**body)["id"] for body in bodies]
    return {**dict.fromkeys(running, "Terminate"), **dict.fromkeys(waiting, "Cancel")}


@pytest.mark.parametrize("width", [1280, 1400, 1920, 375])
def test_every_action_button_is_on_the_screen_at_common_widths(
    page: Page, api: Api, sim_sync: SimControlSync, width: int
) -> None:
    buttons = placed_orders(api, sim_sync)
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, api.key)
    for order_id, label in buttons.items():
        expect(row(page, order_id).get_by_role("button", name=label)).to_be_visible(timeout=SLOW)
    sideways = page.evaluate(
        "Math.max(document.documentElement.scrollWidth - window.innerWidth,"
        " ...[...document.querySelectorAll('.table-wrap')].map(w => w.scrollWidth - w.clientWidth))"
    )
    assert sideways <= 0, f"{sideways} px to scroll sideways at {width} px"
    for order_id, label in buttons.items():
        button = row(page, order_id).get_by_role("button", name=label)
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box is not None and box["width"] >= 40, (order_id, label, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (order_id, label, box)
        button.click(trial=True)  # nothing covers it: it takes the click
