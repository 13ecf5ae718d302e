// The stock view (#/stock): when a GPU model and count was in stock over the last 24 hours or 7 days, one lane per provider and region (shaded where nobody was reading), the summary per offer, and what the providers say is coming.

import { getCatalogue, providerName } from "./api.js";
import { duration, h, money, patch, perHour, showState, since, syncList, when } from "./dom.js";

const HOUR = 3600e3;
const WINDOWS = { "24h": { label: "Last 24 hours", ms: 24 * HOUR }, "7d": { label: "Last 7 days", ms: 7 * 24 * HOUR } };
const RELOAD_MS = 30_000; // history changes slowly; the 2-second poll reloads it this often
const PAGE = 100;
const MAX_PAGES = 20; // at most 2,000 intervals on one timeline
const MIN_GAP = 0.001; // unread stretches narrower than this share of the window are not drawn
const DEBOUNCE_MS = 400;

/** Every interval of the span, following next_cursor (newest first), and the coverage windows. */
async function loadHistory(ctx, q, from, to) {
  const base = new URLSearchParams({
    gpu_model: q.gpu_model, gpu_count: q.gpu_count, since: from.toISOString(), until: to.toISOString(), limit: PAGE,
  });
  const intervals = [];
  let cursor = null;
  let coverage = [];
  for (let i = 0; i < MAX_PAGES; i++) {
    const params = new URLSearchParams(base);
    if (cursor) params.set("cursor", cursor);
    const page = await ctx.api(`/v1/stock/history?${params}`);
    intervals.push(...page.data);
    coverage = page.coverage;
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return { intervals, coverage, truncated: Boolean(cursor) };
}

/** The stretches of [from, to] (ms) that none of the windows covers. */
export function gaps(windows, from, to) {
  const spans = windows
    .map((w) => [Date.parse(w.started_at), Date.parse(w.ended_at || w.last_read_at)])
    .sort((a, b) => a[0] - b[0]);
  const out = [];
  let cursor = from;
  for (const [start, end] of spans) {
    if (start > cursor) out.push([cursor, Math.min(start, to)]);
    cursor = Math.max(cursor, end);
    if (cursor >= to) break;
  }
  if (cursor < to) out.push([cursor, to]);
  return out.filter(([a, b]) => b > a && (b - a) / (to - from) >= MIN_GAP);
}

/** One lane per provider and region with stock, and one per provider read that showed none. */
function lanesOf(intervals, coverage) {
  const lanes = new Map();
  for (const i of intervals) {
    const key = `${i.provider}/${i.region}`;
    if (!lanes.has(key)) lanes.set(key, { key, provider: i.provider, region: i.region, bars: [] });
    lanes.get(key).bars.push(i);
  }
  for (const provider of new Set(coverage.map((w) => w.provider))) {
    if (![...lanes.values()].some((l) => l.provider === provider)) {
      lanes.set(provider, { key: provider, provider, region: null, bars: [] });
    }
  }
  const name = (l) => `${providerName(l.provider)} ${l.region ?? ""}`;
  return [...lanes.values()].sort((a, b) => name(a).localeCompare(name(b)));
}

const placed = (el, start, end, from, to) => {
  const span = to - from;
  const left = Math.max(0, (start - from) / span);
  const right = Math.min(1, (end - from) / span);
  el.style.left = `${(left * 100).toFixed(3)}%`;
  el.style.width = `${(Math.max(0, right - left) * 100).toFixed(3)}%`;
  return el;
};

function barOf(i, from, to) {
  const start = Date.parse(i.first_seen_at);
  const end = i.gone_at ? Date.parse(i.gone_at) : Math.max(Date.parse(i.last_seen_at), to);
  const quantity = i.max_available === null ? "in stock" : `${i.max_available} available`;
  const still = i.gone_at ? "" : " (still in stock)";
  const text = `${perHour(i.price_per_hour_with_fees)} incl. fees · ${quantity} · ${duration(end - start)}${still} · `
    + `${i.sku} · ${when(i.first_seen_at)} – ${i.gone_at ? when(i.gone_at) : "now"}`;
  return placed(h("div", { class: "bar", role: "img", title: text, "aria-label": text, "data-interval": i.id }), start, end, from, to);
}

function gapOf([start, end], from, to) {
  const text = `Not read: ${when(new Date(start).toISOString())} – ${when(new Date(end).toISOString())} (${duration(end - start)})`;
  return placed(h("div", { class: "gap", title: text }), start, end, from, to);
}

function axis(from, to, windowKey) {
  const fmt = windowKey === "24h"
    ? (t) => new Date(t).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })
    : (t) => new Date(t).toLocaleDateString(undefined, { weekday: "short", day: "numeric" });
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const tick = h("span", { class: "tick" }, f === 1 ? "now" : fmt(from + f * (to - from)));
    tick.style.left = `${f * 100}%`;
    return tick;
  });
  return h("div", { class: "lane axis", "aria-hidden": "true" }, h("div", { class: "lane-label" }), h("div", { class: "lane-track" }, ticks));
}

function timeline({ intervals, coverage }, from, to, windowKey) {
  const lanes = lanesOf(intervals, coverage);
  return [
    ...lanes.map((lane) => {
      const windows = coverage.filter((w) => w.provider === lane.provider);
      return h("div", { class: "lane", role: "listitem", "data-lane": lane.key },
        h("div", { class: "lane-label" }, h("strong", {}, providerName(lane.provider)), " ",
          lane.region ? h("span", { class: "nowrap" }, lane.region) : h("span", { class: "muted small" }, "none in stock")),
        h("div", { class: "lane-track" },
          gaps(windows, from, to).map((g) => gapOf(g, from, to)),
          lane.bars.map((i) => barOf(i, from, to))));
    }),
    axis(from, to, windowKey),
  ];
}

const hours = (x) => `${Number(x).toFixed(1)} h`;
const secs = (s) => (s === null ? "—" : duration(s * 1000));

function renderSummaryRow(tr, k) {
  patch(tr, JSON.stringify(k) + since(k.last_seen_at), () => [
    h("td", { "data-label": "Provider" }, providerName(k.provider)),
    h("td", { "data-label": "Region", class: "nowrap" }, k.region),
    h("td", { "data-label": "SKU" }, h("code", {}, k.sku)),
    h("td", { "data-label": "Appearances", class: "num" }, String(k.appearances)),
    h("td", { "data-label": "In stock", class: "num" }, hours(k.hours_in_stock)),
    h("td", { "data-label": "Typical stay", class: "num" }, secs(k.median_seconds_in_stock)),
    h("td", { "data-label": "Typical gap", class: "num" }, secs(k.median_gap_seconds)),
    h("td", { "data-label": "Price incl. fees", class: "num" }, h("strong", {}, perHour(k.price_median)),
      k.price_min !== k.price_max && h("span", { class: "muted small block" }, `${money(k.price_min)} – ${money(k.price_max)}`)),
    h("td", { "data-label": "Last seen", class: "nowrap", title: when(k.last_seen_at) }, `${since(k.last_seen_at)} ago`),
    h("td", { "data-label": "Read for", class: "num" }, hours(k.hours_observed)),
  ]);
}

/** "10+ more within 7 days, 25+ within 30": a provider's forecast in its own words. */
function plans(f) {
  if (f.within_7_days !== null && f.within_30_days !== null) {
    return `${f.within_7_days} more within 7 days, ${f.within_30_days} within 30`;
  }
  return f.within_7_days !== null ? `${f.within_7_days} more within 7 days` : `${f.within_30_days} more within 30 days`;
}

function renderForecast(li, f) {
  patch(li, JSON.stringify(f) + since(f.changed_at), () => [
    h("strong", {}, `${providerName(f.provider)} plans ${plans(f)}`),
    h("span", { class: "muted small" }, ` · ${f.provider_model} in ${f.region} · said so for ${since(f.changed_at)}`),
  ]);
}

export function mountStock(root, ctx) {
  const title = h("h1", { tabindex: -1 }, "Stock");
  const gpuSelect = h("select", { id: "stock-gpu" }, h("option", { value: "" }, "Choose a GPU…"));
  const count = h("input", { id: "stock-count", type: "number", min: 1, max: 64, step: 1, value: 1, inputmode: "numeric" });
  const windowSelect = h("select", { id: "stock-window" },
    Object.entries(WINDOWS).map(([value, w]) => h("option", { value }, w.label)));
  windowSelect.value = "24h";

  const lanes = h("div", { class: "lanes", role: "list", "aria-label": "Stock timeline", "data-testid": "stock-timeline" });
  const caption = h("p", { class: "muted small" });
  const tbody = h("tbody");
  const table = h("div", { class: "table-wrap" },
    h("table", { class: "cards" },
      h("thead", {}, h("tr", {}, ["Provider", "Region", "SKU", "Appearances", "In stock", "Typical stay", "Typical gap", "Price incl. fees", "Last seen", "Read for"]
        .map((t) => h("th", { scope: "col" }, t)))),
      tbody));
  const content = h("div", {}, lanes,
    h("p", { class: "legend muted small" }, h("span", { class: "swatch swatch-bar" }), " in stock (hover for price, quantity and how long) ",
      h("span", { class: "swatch swatch-gap" }), " not read: nothing known"),
    caption);
  const loading = h("p", { class: "muted" }, "Loading stock history…");
  const empty = h("p", { class: "empty" });
  const states = { loading, empty, content };
  const summaryLoading = h("p", { class: "muted" }, "Loading…");
  const summaryEmpty = h("p", { class: "empty" });
  const summaryStates = { loading: summaryLoading, empty: summaryEmpty, content: table };
  const summaryHeading = h("h2", { id: "stock-summary-heading" }, "Summary");
  const forecastList = h("ul", { class: "forecasts", "aria-label": "The providers' forecasts", "data-testid": "stock-forecasts" });
  const forecasts = h("div", { hidden: true }, forecastList,
    h("p", { class: "muted small" }, "What each provider says it plans to add, as it last said it: the provider's word, not ours, and no promise."));

  let loaded = { key: null, at: 0 };
  let seq = 0;
  let debounce = null;

  getCatalogue().then((cat) => {
    if (gpuSelect.length === 1) gpuSelect.append(...cat.gpu_models.map((m) => h("option", { value: m.name }, `${m.name} · ${m.description}`)));
  }, () => null);

  const query = () => {
    const n = count.value.trim();
    if (!gpuSelect.value || !/^\d+$/.test(n) || Number(n) < 1 || Number(n) > 64) return null;
    return { gpu_model: gpuSelect.value, gpu_count: Number(n), window: windowSelect.value };
  };
  const changed = () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => ctx.refresh(), DEBOUNCE_MS);
  };
  for (const el of [gpuSelect, windowSelect]) el.addEventListener("change", () => ctx.refresh());
  count.addEventListener("input", changed);

  root.append(
    h("div", { class: "page-head" }, title,
      h("p", { class: "muted" }, "When a machine was in stock, at what price, and for how long: what the watcher recorded.")),
    h("section", { class: "card", "aria-labelledby": "stock-timeline-heading" },
      h("h2", { id: "stock-timeline-heading" }, "Timeline"),
      h("div", { class: "toolbar stock-controls" },
        h("div", { class: "field inline" }, h("label", { for: "stock-gpu" }, "GPU model"), gpuSelect),
        h("div", { class: "field inline" }, h("label", { for: "stock-count" }, "GPU count"), count),
        h("div", { class: "field inline" }, h("label", { for: "stock-window" }, "Period"), windowSelect)),
      loading, empty, content),
    h("section", { class: "card", "aria-labelledby": "stock-summary-heading" }, summaryHeading, forecasts, summaryLoading, summaryEmpty, table),
  );
  showState(states, "empty");
  showState(summaryStates, "empty");
  summaryEmpty.textContent = "Per provider, region and SKU, once a GPU model is chosen.";

  return {
    name: "Stock",
    title,
    async refresh() {
      const q = query();
      const key = JSON.stringify(q);
      if (!q) {
        loaded = { key, at: Date.now() };
        empty.textContent = "Choose a GPU model and count to see when it was in stock.";
        showState(states, "empty");
        showState(summaryStates, "empty");
        forecasts.hidden = true;
        return;
      }
      if (key === loaded.key && Date.now() - loaded.at < RELOAD_MS) return;
      const mine = ++seq;
      if (key !== loaded.key) {
        showState(states, "loading");
        showState(summaryStates, "loading");
        forecasts.hidden = true;
      }
      const to = Date.now();
      const from = to - WINDOWS[q.window].ms;
      const params = new URLSearchParams({ gpu_model: q.gpu_model, gpu_count: q.gpu_count, window: q.window });
      const [history, summary] = await Promise.all([
        loadHistory(ctx, q, new Date(from), new Date(to)),
        ctx.api(`/v1/stock/summary?${params}`),
      ]);
      if (mine !== seq) return; // the choice changed meanwhile; a newer answer follows
      loaded = { key, at: Date.now() };
      const what = `${q.gpu_count}x ${q.gpu_model}`;
      lanes.replaceChildren(...timeline(history, from, to, q.window));
      const seen = history.intervals.length;
      caption.textContent = `${what}, ${WINDOWS[q.window].label.toLowerCase()}: ${seen} ${seen === 1 ? "interval" : "intervals"} in stock`
        + `${history.truncated ? " (the newest only)" : ""}. Updated ${when(new Date(to).toISOString())}.`
        + (summary.includes_generated ? " Includes generated demo history (autoprovision demo-history), not real stock." : "");
      showState(states, "content");
      if (!seen && !history.coverage.length) {
        empty.textContent = `No ${what} recorded ${WINDOWS[q.window].label.toLowerCase()}, and no provider was read then.`;
        showState(states, "empty");
      }
      summaryHeading.textContent = `Summary, ${WINDOWS[q.window].label.toLowerCase()}`;
      syncList(tbody, summary.data, "data-key", (k) => `${k.provider}/${k.region}/${k.sku}`, renderSummaryRow);
      syncList(forecastList, summary.forecasts, "data-forecast", (f) => `${f.provider}/${f.region}/${f.provider_model}`, renderForecast, "li");
      forecasts.hidden = !summary.forecasts.length;
      summaryEmpty.textContent = `No ${what} in stock ${WINDOWS[q.window].label.toLowerCase()}.`;
      showState(summaryStates, summary.data.length ? "content" : "empty");
    },
  };
}
