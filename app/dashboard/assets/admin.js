// The operator's view (#/admin, signed in with the admin key): every account with its money and
// machines, a credit for any of them, every account's orders, and each provider's status.

import { ApiError, newIdempotencyKey } from "./api.js";
import { gpu, h, money, orderLabel, patch, perHour, pill, syncList, timeEl } from "./dom.js";

/** The credit form of one account's row: an amount and a button; retried safely by its key. */
function creditForm(ctx, account) {
  const amount = h("input", { type: "text", inputmode: "decimal", name: "amount", placeholder: "USD", "aria-label": `Credit to ${account.name}`, autocomplete: "off" });
  const button = h("button", { type: "submit", class: "small" }, "Credit");
  const form = h("form", { class: "credit-form", novalidate: true }, amount, button);
  let key = newIdempotencyKey(); // the same while this amount is retried
  amount.addEventListener("input", () => (key = newIdempotencyKey()));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    try {
      await ctx.api(`/v1/accounts/${encodeURIComponent(account.id)}/credits`, {
        method: "POST", body: { amount: amount.value.trim() }, headers: { "Idempotency-Key": key },
      });
      ctx.notify(`${money(amount.value.trim())} credited to ${account.name}.`);
      amount.value = "";
      key = newIdempotencyKey();
      ctx.refresh();
    } catch (err) {
      if (err instanceof ApiError && err.status === 422) ctx.notify(`Not credited: ${err.message}`, "error");
      else ctx.handleError(err);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function orderRow(tr, o) {
  const d = o.deployment;
  patch(tr, JSON.stringify(o), () => [
    h("td", { "data-label": "Order", class: "wrap" }, orderLabel(o)),
    h("td", { "data-label": "Account" }, h("code", { class: "small wrap" }, o.account_id)),
    h("td", { "data-label": "Status" }, pill(o.status)),
    h("td", { "data-label": "GPU", class: "nowrap" }, gpu(o)),
    h("td", { "data-label": "Machine" }, d ? `${d.provider} ${d.region} ${d.instance_type}` : "—"),
    h("td", { "data-label": "Charged", class: "num" }, money(o.charged_usd)),
    h("td", { "data-label": "Placed" }, timeEl(o.created_at)),
  ]);
}

function providerRow(tr, p) {
  const read = p.stock;
  patch(tr, JSON.stringify(p), () => [
    h("td", { "data-label": "Provider" }, p.name),
    h("td", { "data-label": "Enabled" }, p.enabled ? "yes" : "no (no credentials)"),
    h("td", { "data-label": "Last stock read" }, !read ? "never"
      : [read.fetched_at ? timeEl(read.fetched_at) : "never worked", ` · ${read.offers} offers`,
        read.error ? h("span", { class: "error-text block" }, read.error) : null].filter(Boolean)),
    h("td", { "data-label": "Our balance" }, !p.balance ? "—"
      : p.balance.amount !== null ? money(p.balance.amount) : h("span", { class: "error-text" }, p.balance.error || "unknown")),
    h("td", { "data-label": "Creates, last hour", class: "num" }, String(p.creates_last_hour)),
  ]);
}

export function mountAdmin(root, ctx) {
  const title = h("h1", { tabindex: -1 }, "Admin");
  const accounts = h("tbody");
  const providers = h("tbody");
  const orders = h("tbody");
  root.append(
    h("div", { class: "page-head" }, title, h("p", { class: "muted" }, "Signed in with the admin key: every account, every order, and the providers.")),
    h("section", { class: "card", "aria-labelledby": "h-accounts" },
      h("h2", { id: "h-accounts" }, "Accounts"),
      h("div", { class: "table-wrap" }, h("table", { class: "cards", "data-testid": "accounts" },
        h("thead", {}, h("tr", {}, ["Account", "Balance", "Available", "Machines", "Spend", ""].map((t) => h("th", { scope: "col" }, t)))),
        accounts))),
    h("section", { class: "card", "aria-labelledby": "h-orders" },
      h("h2", { id: "h-orders" }, "Orders"),
      h("p", { class: "muted small" }, "Every account's newest 100 orders."),
      h("div", { class: "table-wrap" }, h("table", { class: "cards compact", "data-testid": "orders" },
        h("thead", {}, h("tr", {}, ["Order", "Account", "Status", "GPU", "Machine", "Charged", "Placed"].map((t) => h("th", { scope: "col" }, t)))),
        orders))),
    h("section", { class: "card", "aria-labelledby": "h-providers" },
      h("h2", { id: "h-providers" }, "Providers"),
      h("div", { class: "table-wrap" }, h("table", { class: "cards compact", "data-testid": "providers" },
        h("thead", {}, h("tr", {}, ["Provider", "Enabled", "Last stock read", "Our balance", "Creates, last hour"].map((t) => h("th", { scope: "col" }, t)))),
        providers))),
  );
  return {
    name: "Admin",
    title,
    async refresh() {
      const [listed, status, placed] = await Promise.all([
        ctx.api("/v1/accounts?limit=100"), ctx.api("/v1/admin/providers"), ctx.api("/v1/admin/orders?limit=100"),
      ]);
      syncList(orders, placed.data, "data-order-id", (o) => o.id, orderRow);
      syncList(accounts, listed.data, "data-account-id", (a) => a.id, (tr, a) => {
        if (!tr._credit) {
          tr._credit = creditForm(ctx, a);
          tr.append(h("td", { "data-label": "Account" }), h("td", { "data-label": "Balance", class: "num" }),
            h("td", { "data-label": "Available", class: "num" }), h("td", { "data-label": "Machines", class: "num" }),
            h("td", { "data-label": "Spend", class: "num" }), h("td", { class: "actions" }, tr._credit));
        }
        const cells = [
          [h("strong", {}, a.name), h("br"), h("code", { class: "small wrap" }, a.id)],
          money(a.balance), money(a.available), String(a.machines), perHour(a.hourly_spend),
        ];
        cells.forEach((content, i) => patch(tr.cells[i], JSON.stringify([a, i]), () => content));
      });
      syncList(providers, status.data, "data-provider", (p) => p.provider, providerRow);
    },
  };
}
