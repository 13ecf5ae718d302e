// The account view (#/account): balance, webhook endpoints (add, remove, recent deliveries) and account events.

import { ApiError, newIdempotencyKey } from "./api.js";
import { clearFieldErrors, duration, h, money, orderLabel, patch, pill, shortId, showFieldErrors, syncList, timeEl } from "./dom.js";

const LEDGER_PAGE = 50; // ledger entries a page

function attemptText(a) {
  return `${a.error || `HTTP ${a.status_code}`} in ${a.duration_ms} ms`;
}

function deliveriesTable(list) {
  if (!list.length) return h("p", { class: "muted small" }, "No deliveries yet. Events are sent here when your orders change.");
  return h("div", { class: "table-wrap" }, h("table", { class: "compact" },
    h("thead", {}, h("tr", {}, ["Event", "Status", "Created", "Attempts", "Last attempt"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, list.map((d) => {
      const last = d.attempts[d.attempts.length - 1];
      return h("tr", {},
        h("td", {}, h("code", {}, d.event_type)),
        h("td", {}, pill(d.status)),
        h("td", {}, timeEl(d.created_at)),
        h("td", { class: "num" }, String(d.attempts.length)),
        h("td", {}, last ? attemptText(last) : "—"));
    }))));
}

/** One endpoint: its URL and state, a toggle showing its recent deliveries, and a remove button. */
function renderEndpoint(ctx, li, e, open, onRemoved) {
  if (!li._built) {
    li._built = true;
    li._info = h("div", { class: "endpoint-info" });
    li._panel = h("div", { class: "deliveries", id: `deliveries-${e.id}`, hidden: true });
    const toggle = h("button", { type: "button", class: "small", "aria-expanded": "false", "aria-controls": li._panel.id }, "Deliveries");
    toggle.addEventListener("click", () => {
      const show = !open.has(e.id);
      show ? open.add(e.id) : open.delete(e.id);
      toggle.setAttribute("aria-expanded", String(show));
      li._panel.hidden = !show;
      li._panel._sig = undefined;
      if (show) li._panel.replaceChildren(h("p", { class: "muted small" }, "Loading deliveries…"));
      ctx.refresh();
    });
    const remove = h("button", { type: "button", class: "small danger-outline" }, "Remove");
    remove.addEventListener("click", async () => {
      const ok = await ctx.confirm({
        title: "Remove this webhook endpoint?",
        message: `${li._url} stops receiving events, and its delivery history is deleted.`,
        confirm: "Remove endpoint",
        keep: "Keep it",
      });
      if (!ok) return;
      try {
        await ctx.api(`/v1/webhook-endpoints/${encodeURIComponent(e.id)}`, { method: "DELETE" });
        ctx.notify("Webhook endpoint removed.");
        onRemoved(e.id);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) onRemoved(e.id);
        else ctx.handleError(err);
      }
      ctx.refresh();
    });
    li.append(h("div", { class: "endpoint-head" }, li._info, h("div", { class: "endpoint-actions" }, toggle, remove)), li._panel);
  }
  li._url = e.url;
  patch(li._info, JSON.stringify(e), () => [
    h("code", { class: "wrap" }, e.url),
    h("div", { class: "small" },
      pill(e.enabled ? "enabled" : "disabled"), " ",
      e.description ? h("span", {}, e.description) : h("span", { class: "muted" }, "No description"),
      e.events ? h("span", { class: "muted" }, ` · ${e.events.join(", ")}`) : h("span", { class: "muted" }, " · all events"),
      e.disabled_reason && h("span", { class: "error-text block" }, e.disabled_reason)),
  ]);
}

/** Demo mode's top-up: play money the account adds itself (shown only where the API allows it). */
function topUpForm(ctx, onDone) {
  const form = h("form", { class: "top-up webhook-form", novalidate: true, hidden: true, "data-testid": "top-up" },
    h("div", { class: "field" }, h("label", { for: "top-up-amount" }, "Add play money (USD)"),
      h("input", { id: "top-up-amount", name: "amount", type: "text", inputmode: "decimal", value: "500", "aria-describedby": "tu-error-amount", autocomplete: "off" }),
      h("p", { class: "field-error", id: "tu-error-amount" })),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary" }, "Top up")),
    h("p", { class: "muted small full" }, "Demo mode only, up to $1,000 at a time; live top-ups are the operator's."),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearFieldErrors(form);
    const amount = form.elements.amount.value.trim();
    try {
      await ctx.api("/v1/account/credits", { method: "POST", body: { amount }, headers: { "Idempotency-Key": newIdempotencyKey() } });
      onDone();
    } catch (err) {
      if (err instanceof ApiError && [403, 422].includes(err.status)) showFieldErrors(form, err, "tu-error-");
      else ctx.handleError(err);
    }
  });
  return form;
}

function webhookForm(ctx, onCreated) {
  const secretBox = h("div", { class: "secret", hidden: true });
  const form = h("form", { class: "webhook-form", novalidate: true },
    h("div", { class: "field grow" }, h("label", { for: "webhook-url" }, "Webhook URL"),
      h("input", { id: "webhook-url", name: "url", type: "url", placeholder: "https://example.com/hooks", "aria-describedby": "wh-error-url", autocomplete: "off" }),
      h("p", { class: "field-error", id: "wh-error-url" })),
    h("div", { class: "field grow" }, h("label", { for: "webhook-description" }, "Description"),
      h("input", { id: "webhook-description", name: "description", type: "text", placeholder: "optional", "aria-describedby": "wh-error-description" }),
      h("p", { class: "field-error", id: "wh-error-description" })),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary" }, "Add endpoint")),
    h("p", { class: "form-alert full", role: "alert" }),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearFieldErrors(form);
    const url = form.elements.url.value.trim();
    const description = form.elements.description.value.trim();
    try {
      const created = await ctx.api("/v1/webhook-endpoints", { method: "POST", body: { url, ...(description && { description }) } });
      form.reset();
      showSecret(created.secret);
      onCreated(created);
    } catch (err) {
      if (err instanceof ApiError && [409, 422].includes(err.status)) showFieldErrors(form, err, "wh-error-");
      else ctx.handleError(err);
    }
  });

  function showSecret(secret) {
    const copy = h("button", { type: "button", class: "small" }, "Copy");
    copy.addEventListener("click", () => navigator.clipboard.writeText(secret).then(
      () => (copy.textContent = "Copied"), () => (copy.textContent = "Copy failed: select it by hand")));
    const dismiss = h("button", { type: "button", class: "small" }, "Done");
    dismiss.addEventListener("click", () => (secretBox.hidden = true));
    secretBox.replaceChildren(
      h("p", {}, h("strong", {}, "Signing secret — copy it now: "), "it is not shown again. Verify deliveries with it (Standard Webhooks)."),
      h("div", { class: "secret-row" }, h("code", { class: "wrap" }, secret), copy, dismiss));
    secretBox.hidden = false;
  }
  return [form, secretBox];
}

export function mountAccount(root, ctx) {
  const title = h("h1", { tabindex: -1 }, "Account");
  const stat = (label, field, hint) => h("div", { class: "stat" },
    h("span", { class: "stat-label" }, label), h("span", { class: "stat-value", "data-field": field }, "…"), h("span", { class: "muted small" }, hint));
  const stats = h("div", { class: "stats" },
    stat("Balance", "balance", "credited minus spent"),
    stat("Held", "held", "reserved while a machine is being created"),
    stat("Available", "available", "what new deployments can use"),
    stat("Machines cost", "hourly_spend", "per hour, your running machines together"),
    stat("Runway", "runway_seconds", "how long the available balance pays them"));
  const topUp = topUpForm(ctx, () => ctx.refresh());
  const ledger = h("tbody");
  const ledgerTable = h("div", { class: "table-wrap" }, h("table", { class: "compact", "data-testid": "ledger" },
    h("thead", {}, h("tr", {}, ["When", "Kind", "Amount", "Balance after", "Order", "Note"].map((t) => h("th", { scope: "col" }, t)))),
    ledger));
  const noLedger = h("p", { class: "muted" }, "Loading the ledger…");
  const orderNames = new Map(); // order id -> its name (or short id), for the ledger
  let older = []; // entries past the newest page, loaded with "Show older"
  let olderFrom = null; // the cursor of the next older page
  const more = h("button", { type: "button", class: "small", hidden: true }, "Show older movements");
  more.addEventListener("click", async () => {
    more.disabled = true;
    try {
      const page = await ctx.api(`/v1/account/ledger?limit=${LEDGER_PAGE}&cursor=${encodeURIComponent(olderFrom)}`);
      older = [...older, ...page.data];
      olderFrom = page.next_cursor;
      await ctx.refresh();
    } catch (err) {
      ctx.handleError(err);
    } finally {
      more.disabled = false;
    }
  });
  const endpoints = h("ul", { class: "endpoints plain" });
  const noEndpoints = h("p", { class: "muted" }, "Loading endpoints…");
  const events = h("ol", { class: "events plain" });
  const noEvents = h("p", { class: "muted" }, "Loading account events…");
  const open = new Set(); // endpoint ids whose deliveries are shown
  let list = [];

  const renderEndpoints = () => {
    syncList(endpoints, list, "data-endpoint-id", (e) => e.id, (li, e) =>
      renderEndpoint(ctx, li, e, open, (id) => {
        list = list.filter((x) => x.id !== id);
        open.delete(id);
        renderEndpoints();
        root.querySelector("#h-hooks").focus(); // the removed endpoint's buttons are gone
      }), "li");
    noEndpoints.textContent = list.length ? "" : "No webhook endpoints yet. Add one to be told when an order deploys or runs.";
    noEndpoints.hidden = list.length > 0;
  };

  root.append(
    h("div", { class: "page-head" }, title, h("p", { class: "muted", "data-field": "name" })),
    h("section", { class: "card", "aria-labelledby": "h-money" }, h("h2", { id: "h-money" }, "Money"), stats, topUp),
    h("section", { class: "card", "aria-labelledby": "h-ledger" },
      h("h2", { id: "h-ledger" }, "Ledger"),
      h("p", { class: "muted small" }, "Every movement of money, newest first: top-ups, the hour held while a machine is created, each billing hour paid, refunds."),
      noLedger, ledgerTable, more),
    h("section", { class: "card", "aria-labelledby": "h-hooks" },
      h("h2", { id: "h-hooks", tabindex: -1 }, "Webhook endpoints"),
      h("p", { class: "muted small" }, "The service POSTs signed events to these URLs when your orders change."),
      webhookForm(ctx, (created) => {
        list = [created, ...list.filter((e) => e.id !== created.id)];
        renderEndpoints();
        ctx.refresh();
      }),
      noEndpoints, endpoints),
    h("section", { class: "card", "aria-labelledby": "h-events" },
      h("h2", { id: "h-events" }, "Account events"), noEvents, events),
  );

  return {
    name: "Account",
    title,
    async refresh() {
      const [account, hooks, evts, moves, recent] = await Promise.all([
        ctx.api("/v1/account"), ctx.api("/v1/webhook-endpoints?limit=100"), ctx.api("/v1/account/events?limit=50"),
        ctx.api(`/v1/account/ledger?limit=${LEDGER_PAGE}`), ctx.api("/v1/orders?limit=100"),
      ]);
      for (const o of recent.data) orderNames.set(o.id, orderLabel(o));
      const shown = [...moves.data, ...older.filter((e) => !moves.data.some((m) => m.id === e.id))];
      olderFrom = older.length ? olderFrom : moves.next_cursor;
      more.hidden = !olderFrom;
      for (const f of ["balance", "held", "available", "hourly_spend"]) root.querySelector(`[data-field="${f}"]`).textContent = money(account[f]);
      root.querySelector('[data-field="runway_seconds"]').textContent =
        account.runway_seconds === null ? "nothing runs" : `${duration(account.runway_seconds * 1000)}${account.low_balance ? " (low)" : ""}`;
      topUp.hidden = !account.can_top_up;
      syncList(ledger, shown, "data-entry-id", (e) => e.id, (tr, e) =>
        patch(tr, e.id, () => [
          h("td", {}, timeEl(e.created_at)),
          h("td", {}, e.kind.replace("_", " ")),
          h("td", { class: "num" }, `${["debit"].includes(e.kind) ? "-" : ""}${money(e.amount)}`),
          h("td", { class: "num" }, money(e.balance_after)),
          h("td", { class: "wrap" }, e.order_id
            ? h("a", { href: `#/orders/${encodeURIComponent(e.order_id)}`, title: e.order_id }, orderNames.get(e.order_id) || shortId(e.order_id))
            : "—"),
          h("td", { class: "small" }, e.note || ""),
        ]));
      noLedger.textContent = moves.data.length ? "" : "No movements yet.";
      noLedger.hidden = moves.data.length > 0;
      ledgerTable.hidden = !moves.data.length;
      root.querySelector('[data-field="name"]').textContent = `${account.name} · ${account.id}`;
      list = hooks.data;
      renderEndpoints();
      await Promise.all([...open].filter((id) => list.some((e) => e.id === id)).map(async (id) => {
        const page = await ctx.api(`/v1/webhook-endpoints/${encodeURIComponent(id)}/deliveries?limit=10`);
        const panel = endpoints.querySelector(`[data-endpoint-id="${CSS.escape(id)}"] .deliveries`);
        if (panel && open.has(id)) patch(panel, JSON.stringify(page.data), () => deliveriesTable(page.data));
      }));
      syncList(events, evts.data, "data-event-id", (e) => e.id, (li, e) =>
        patch(li, e.id, () => [timeEl(e.created_at), " ", h("span", {}, e.message)]), "li");
      noEvents.textContent = evts.data.length ? "" : "No account events yet. Things like an endpoint being disabled show up here.";
      noEvents.hidden = evts.data.length > 0;
    },
  };
}
