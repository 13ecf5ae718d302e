// The order form's expected wait: as GPU, count, providers and price change, one line from POST /v1/stock/estimate and a price curve (choosing a point fills the price); and a plain line per shape for the form's other shapes.

import { drawPriceCurve } from "./chart.js";
import { duration, h, perHour } from "./dom.js";

const DEBOUNCE_MS = 400;
const PRICE = /^\d{1,7}(\.\d{1,2})?$/;
const WINDOW = "7d";
const WINDOW_LABEL = "Last 7 days";

/** The typical wait in words: "typical wait 5 h", "typical wait more than 27 h", "typically in stock at once". */
export function typicalWait(w) {
  if (w.median_seconds === 0) return "typically in stock at once";
  if (w.median_seconds !== null) return `typical wait ${duration(w.median_seconds * 1000)}`;
  if (w.median_more_than_seconds !== null) return `typical wait more than ${duration(w.median_more_than_seconds * 1000)}`;
  return "no typical wait";
}

/** "Last 7 days at or under $50.28/h: 14 appearances, typical wait 5 h", or what is missing. */
export function estimateLine(e) {
  const head = `${WINDOW_LABEL} at or under ${perHour(e.max_price_per_hour)}`;
  if (e.status !== "ok") return `${head}: not enough history: ${e.missing}`;
  const times = `${e.appearances} ${e.appearances === 1 ? "appearance" : "appearances"}`;
  const made = e.includes_generated ? " (partly generated demo history, not real stock)" : "";
  return `${head}: ${times}, ${typicalWait(e)}${made}`;
}

/** The curve's points: the observed price levels and the order's own max, by price, once each. */
function curvePoints(e) {
  const byPrice = new Map();
  for (const w of e.price_curve) byPrice.set(w.max_price_per_hour, { ...w, mine: false });
  byPrice.set(e.max_price_per_hour, { ...e, mine: true });
  return [...byPrice.values()]
    .filter((w) => w.status === "ok" && (w.median_seconds !== null || w.median_more_than_seconds !== null))
    .map((w) => ({ ...w, price: w.max_price_per_hour }))
    .sort((a, b) => Number(a.price) - Number(b.price));
}

/**
 * Adds the estimate to an order form: `request()` gives the estimate's body from the form (or
 * null while GPU, count, a provider or a valid price is missing); `priceInput` is filled when a
 * point is chosen. Returns the element to place in the form.
 */
export function attachEstimate(form, ctx, request, priceInput) {
  const line = h("p", { class: "estimate-line", role: "status", "data-testid": "estimate" });
  const chart = h("div", { class: "price-curve", "data-testid": "price-curve" });
  const choices = h("div", { class: "curve-points" });
  const box = h("div", { class: "estimate", hidden: true }, line, chart, choices);
  let timer = null;
  let seq = 0;
  let sent = null;

  const hide = () => {
    seq++; // any answer still on its way is stale now
    sent = null;
    box.hidden = true;
  };

  const pick = (price) => {
    priceInput.value = price;
    priceInput.dispatchEvent(new Event("input", { bubbles: true }));
    priceInput.focus();
  };

  async function update() {
    const body = request();
    if (!body || !PRICE.test(body.max_price_per_hour)) return hide();
    const key = JSON.stringify(body);
    if (key === sent) return;
    sent = key;
    const mine = ++seq;
    let e;
    try {
      e = await ctx.api("/v1/stock/estimate", { method: "POST", body: { ...body, window: WINDOW } });
    } catch {
      if (mine === seq) hide(); // a field the API refuses is explained when the order is placed
      return;
    }
    if (mine !== seq) return; // the form changed meanwhile; a newer answer follows
    line.textContent = estimateLine(e);
    line.classList.toggle("insufficient", e.status !== "ok");
    box.hidden = false;
    const points = curvePoints(e);
    chart.hidden = choices.hidden = points.length < 2;
    if (points.length < 2) return;
    choices.replaceChildren(h("span", { class: "muted" }, "Prices seen:"), ...points.map((p) =>
      h("button", { type: "button", class: "small", "aria-pressed": String(p.mine), onclick: () => pick(p.price) },
        `${perHour(p.price)} · ${typicalWait(p).replace("typical wait ", "")}`)));
    await drawPriceCurve(chart, points, pick, () => mine === seq);
  }

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(update, DEBOUNCE_MS);
  };
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("reset", () => {
    clearTimeout(timer);
    hide();
  });
  return box;
}

/**
 * One shape's expected wait as a line of text (an added alternative's, or a shape an order by
 * model takes): `line.show(body)` asks POST /v1/stock/estimate for that shape, `show(null)`
 * clears it. Only the latest answer is shown.
 */
export function waitLine(ctx, attrs = {}) {
  const line = h("p", { class: "estimate-line wait", hidden: true, ...attrs });
  let seq = 0;
  let sent = null;
  line.show = async (body) => {
    if (!body || !PRICE.test(body.max_price_per_hour || "")) {
      seq++;
      sent = null;
      line.hidden = true;
      line.textContent = "";
      return;
    }
    const key = JSON.stringify(body);
    if (key === sent) return;
    sent = key;
    const mine = ++seq;
    let e;
    try {
      e = await ctx.api("/v1/stock/estimate", { method: "POST", body: { ...body, window: WINDOW } });
    } catch {
      if (mine !== seq) return;
      sent = null; // asked again at the next change
      line.textContent = "Expected wait: not known for this shape";
      line.classList.add("insufficient");
      line.hidden = false;
      return;
    }
    if (mine !== seq) return;
    line.textContent = estimateLine(e);
    line.classList.toggle("insufficient", e.status !== "ok");
    line.hidden = false;
  };
  return line;
}
