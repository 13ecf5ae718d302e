// The orders view (#/orders): the live table of the account's orders, the "Place an order" form, and cancelling.

import { attachAlternatives } from "./alternatives.js";
import { ApiError, getCatalogue, newIdempotencyKey, providerName } from "./api.js";
import {
  between, clearFieldErrors, gpu, h, money, orderLabel, patch, perHour, pill, showFieldErrors, showState, since,
  syncList, when,
} from "./dom.js";
import { attachEstimate } from "./estimate.js";
import { attachModelOrder } from "./model_order.js";
import { checkedProviders, describeError, errorSlot, field, int, providerChecks, recheckField } from "./order_fields.js";

const FINAL = ["cancelled", "expired", "failed", "terminated", "lost"];
/** Statuses a terminate applies to: a machine is (or is about to be) there. */
export const TERMINABLE = ["deploying", "deployed", "running"];

/** Confirms, then cancels a waiting order; afterwards focus moves to the order's link (or the page heading). */
export async function cancelOrder(ctx, order) {
  const label = orderLabel(order);
  const ok = await ctx.confirm({
    title: "Cancel this order?",
    message: `“${label}” stops waiting for stock. This cannot be undone.`,
    confirm: "Cancel order",
    keep: "Keep waiting",
  });
  if (!ok) return;
  try {
    await ctx.api(`/v1/orders/${encodeURIComponent(order.id)}/cancel`, { method: "POST" });
    ctx.notify(`Cancelled “${label}”.`);
    (document.querySelector(`tr[data-order-id="${CSS.escape(order.id)}"] a`) || document.querySelector("main h1"))?.focus();
  } catch (err) {
    if (err instanceof ApiError && ![401, 403].includes(err.status)) ctx.notify(`Could not cancel: ${err.message}.`, "error");
    else ctx.handleError(err);
  }
  ctx.refresh();
}

/** Confirms, then terminates an order's machine (deleted for good; the unused part comes back). */
export async function terminateOrder(ctx, order) {
  const label = orderLabel(order);
  const ok = await ctx.confirm({
    title: "Terminate this machine?",
    message: `“${label}”: its machine is deleted, with its disk, and cannot be brought back. ` +
      "What was paid and not used is refunded.",
    confirm: "Terminate",
    keep: "Keep it running",
  });
  if (!ok) return;
  try {
    await ctx.api(`/v1/orders/${encodeURIComponent(order.id)}/terminate`, { method: "POST" });
    ctx.notify(`Terminating “${label}”.`);
    (document.querySelector(`tr[data-order-id="${CSS.escape(order.id)}"] a`) || document.querySelector("main h1"))?.focus();
  } catch (err) {
    if (err instanceof ApiError && ![401, 403].includes(err.status)) ctx.notify(`Could not terminate: ${err.message}.`, "error");
    else ctx.handleError(err);
  }
  ctx.refresh();
}

/** A deployment that is only a past try (refused, or failed before running): no machine behind it. */
export const isDeadAttempt = (d) => d && (d.status === "not_created" || d.status === "failed");

/** "3 min" waiting so far, or how long it took to get a machine, or how long it waited before ending. */
function waited(o) {
  const d = o.deployment;
  if (["deployed", "running", "terminating"].includes(o.status) && d) {
    return { text: `took ${between(o.created_at, d.created_at)}`, title: `Deployed ${when(d.created_at)}` };
  }
  if (["terminated", "lost"].includes(o.status) && o.running_since && o.ended_at) {
    return { text: `ran ${between(o.running_since, o.ended_at)}`, title: `${o.status} ${when(o.ended_at)}` };
  }
  if (FINAL.includes(o.status)) return { text: `after ${between(o.created_at, o.updated_at)}`, title: `${o.status} ${when(o.updated_at)}` };
  return { text: since(o.created_at), title: `Placed ${when(o.created_at)}` };
}

function deploymentCell(o) {
  const d = o.deployment;
  if (!d) return h("span", { class: "muted" }, "—");
  const where = h("span", { class: "nowrap" }, `${providerName(d.provider)} ${d.region}`);
  if (isDeadAttempt(d)) return h("span", { class: "muted" }, "last try: ", where, ` (${d.status.replace("_", " ")})`);
  const ended = o.status === "terminated" || o.status === "lost";
  const cost = d.status === "running" || ended ? ` · ${money(o.charged_usd)} ${ended ? "in all" : "so far"}` : "";
  const ip = d.ip ? `${d.nodes > 1 ? "login " : ""}${d.ip}` : "IP pending";
  return [where, h("br"), h("span", { class: "muted" }, `${perHour(d.price_per_hour_with_fees)} · ${ip}${cost}`)];
}

/** The table's columns: [header, data-field, class, content]. */
const COLUMNS = [
  ["Order", "name", "wrap", (o) => h("a", { href: `#/orders/${encodeURIComponent(o.id)}` }, orderLabel(o))],
  ["Status", "status", "", (o) => pill(o.status)],
  ["GPU", "gpu", "nowrap", (o) => (o.alternatives?.length > 1
    ? `${gpu(o)} (or ${o.alternatives.length - 1} more)` : gpu(o))],
  ["Providers", "providers", "", (o) => o.providers.map(providerName).join(", ")],
  ["Max price", "max_price_per_hour", "num", (o) => perHour(o.max_price_per_hour)],
  ["Waiting", "waited", "nowrap", (o) => waited(o).text],
  ["Deployment", "deployment", "", (o) => deploymentCell(o)],
  ["", "actions", "actions", (o, ctx) =>
    (o.status === "waiting" && h("button", { type: "button", class: "small", onclick: () => cancelOrder(ctx, o) }, "Cancel")) ||
    (TERMINABLE.includes(o.status) &&
      h("button", { type: "button", class: "small danger-outline", onclick: () => terminateOrder(ctx, o) }, "Terminate"))],
];

/** Updates one row cell by cell, touching only cells whose content changed (focus stays put). */
function renderRow(ctx, tr, o) {
  if (!tr.cells.length) {
    tr.append(...COLUMNS.map(([label, field, cls]) => h("td", { "data-label": label, "data-field": field, class: cls || null })));
  }
  COLUMNS.forEach(([, , , content], i) => {
    const nodes = [content(o, ctx)].flat().filter((c) => c !== false && c !== null && c !== undefined);
    const sig = nodes.map((c) => (c instanceof Node ? c.outerHTML : String(c))).join("");
    patch(tr.cells[i], sig, () => nodes);
  });
  tr.cells[5].title = waited(o).title;
}

// ---- the form --------------------------------------------------------------------------------

/** Whether the form's own shape is a cluster (nodes 2 or more): only then do its cluster fields count. */
const isCluster = (form) => Number(form.elements.nodes.value) > 1;

/** An order's machine fields: with alternatives, the form's own shape is the first of them. */
const MACHINE = ["gpu_model", "gpu_count", "nodes", "providers", "max_price_per_hour", "regions", "min_disk_gb", "interconnect",
  "cluster_interconnect"];

/** Marks a field that only ordering a machine shape has (ordering by model, the model chooses it). */
const shapeOnly = (el) => {
  el.dataset.shapeOnly = "";
  return el;
};

function orderForm(onPlaced, ctx) {
  const gpuSelect = h("select", {}, h("option", { value: "" }, "Choose a GPU…"));
  const interconnect = h("select", {}, h("option", { value: "" }, "Any"));
  const clusterFields = [
    h("select", {}, h("option", { value: "" }, "Any"), h("option", { value: "infiniband" }, "InfiniBand")),
    h("select", {}, h("option", { value: "keep" }, "Keep the rest"), h("option", { value: "terminate" }, "Terminate the cluster")),
  ];
  const providers = h("div", { class: "checks" });
  const status = h("p", { class: "form-alert", role: "alert" });
  const kind = (value, label, checked) => h("label", { class: "check", for: `kind-${value}` },
    h("input", { type: "radio", id: `kind-${value}`, name: "kind", value, checked }), label);
  const scriptField = field("Start-up script", "startup_script",
    h("textarea", { rows: 4, placeholder: "optional: #!/bin/bash …", spellcheck: "false", autocomplete: "off" }),
    "Runs once when the machine boots, at the providers that run one (an order with a script never deploys at the others). Kept encrypted: shown again only as its size and SHA-256.");
  let idemKey = newIdempotencyKey();

  const form = h("form", { class: "card order-form", novalidate: true, "aria-labelledby": "place-heading" },
    h("h2", { id: "place-heading" }, "Place an order"),
    h("fieldset", { class: "order-kind" }, h("legend", {}, "What to order"),
      h("div", { class: "checks" }, kind("shape", "A machine shape", true), kind("model", "A model to run", false))),
    h("div", { class: "grid" },
      shapeOnly(field("GPU model", "gpu_model", gpuSelect)),
      shapeOnly(field("GPU count", "gpu_count", h("input", { type: "number", min: 1, max: 16, step: 1, value: 1, inputmode: "numeric" }))),
      field("Max price per hour (USD, incl. fees)", "max_price_per_hour",
        h("input", { type: "text", inputmode: "decimal", placeholder: "e.g. 46.50", autocomplete: "off" })),
      field("Name", "name", h("input", { type: "text", maxlength: 100, placeholder: "optional", autocomplete: "off" })),
      field("Regions", "regions", h("input", { type: "text", placeholder: "any; or e.g. FIN-01, CANADA-1", autocomplete: "off" })),
      field("Min disk (GB)", "min_disk_gb", h("input", { type: "number", min: 1, step: 1, placeholder: "any", inputmode: "numeric" })),
      shapeOnly(field("Interconnect", "interconnect", interconnect)),
      field("Expires at", "expires_at", h("input", { type: "datetime-local" })),
      field("Max runtime (hours)", "max_runtime_hours",
        h("input", { type: "text", inputmode: "decimal", placeholder: "none; e.g. 12", autocomplete: "off" })),
      field("Max total (USD, incl. fees)", "max_total_usd",
        h("input", { type: "text", inputmode: "decimal", placeholder: "none; e.g. 500", autocomplete: "off" })),
    ),
    h("div", { class: "grid cluster" },
      shapeOnly(field("Nodes", "nodes", h("input", { type: "number", min: 1, max: 16, step: 1, value: 1, inputmode: "numeric" }),
        "Machines deployed together as one cluster; the max price is for the whole cluster.")),
      shapeOnly(field("Cluster interconnect", "cluster_interconnect", clusterFields[0])),
      field("If a node is lost", "on_node_lost", clusterFields[1]),
    ),
    h("div", { class: "grid single" },
      field("SSH public key", "ssh_public_key",
        h("textarea", { rows: 2, placeholder: "optional: ssh-ed25519 AAAA… you@laptop (the machine accepts it)", spellcheck: "false", autocomplete: "off" })),
      scriptField),
    h("fieldset", { class: "providers", "aria-describedby": "error-providers" },
      h("legend", {}, "Providers"), providers, errorSlot("providers")),
    status,
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary" }, "Place order")),
  );

  const byModel = () => form.elements.kind.value === "model";

  /** The form's own shape as today's single-shape request: only the fields filled in; anything odd is sent as typed so the API explains it. */
  function shapeBody() {
    const v = (name) => form.elements[name].value.trim();
    const b = {
      gpu_model: v("gpu_model") || undefined,
      gpu_count: v("gpu_count") ? int(v("gpu_count")) : undefined,
      providers: checkedProviders(form, "providers"),
      max_price_per_hour: v("max_price_per_hour") || undefined,
    };
    const regions = v("regions").split(",").map((s) => s.trim()).filter(Boolean);
    if (regions.length) b.regions = regions;
    if (v("min_disk_gb")) b.min_disk_gb = int(v("min_disk_gb"));
    if (v("interconnect")) b.interconnect = v("interconnect");
    if (v("nodes") && v("nodes") !== "1") b.nodes = int(v("nodes"));
    if (isCluster(form) && v("cluster_interconnect")) b.cluster_interconnect = v("cluster_interconnect");
    if (isCluster(form) || alternatives.anyCluster() || byModel()) b.on_node_lost = v("on_node_lost");
    if (v("expires_at")) {
      const t = new Date(v("expires_at"));
      b.expires_at = Number.isNaN(t.getTime()) ? v("expires_at") : t.toISOString();
    }
    if (v("name")) b.name = v("name");
    if (v("max_runtime_hours")) b.max_runtime_hours = v("max_runtime_hours");
    if (v("max_total_usd")) b.max_total_usd = v("max_total_usd");
    if (v("ssh_public_key")) b.ssh_public_key = v("ssh_public_key");
    const script = form.elements.startup_script.value; // sent as typed: the machine runs these bytes
    if (script.trim()) b.startup_script = script;
    return b;
  }

  /** The request body: the form's shape alone (today's body), with its alternatives, or the order by model. */
  function body() {
    const b = shapeBody();
    if (byModel()) return byModelPart.request(b);
    if (!alternatives.count()) return b;
    const first = {};
    for (const name of MACHINE) {
      if (name in b) first[name] = b[name];
      delete b[name];
    }
    return { ...alternatives.request(first), ...b };
  }

  /** What the estimate needs (the form's own shape's matching fields), or null until they are filled in. */
  function estimateRequest() {
    if (byModel()) return null;
    const { gpu_model, gpu_count, providers: chosen, max_price_per_hour, regions, min_disk_gb, interconnect, nodes = 1,
      cluster_interconnect } = shapeBody();
    if (!gpu_model || !Number.isInteger(gpu_count) || !chosen.length || !max_price_per_hour) return null;
    if (min_disk_gb !== undefined && !Number.isInteger(min_disk_gb)) return null;
    if (!Number.isInteger(nodes)) return null;
    return { gpu_model, gpu_count, nodes, providers: chosen, max_price_per_hour, regions, min_disk_gb, interconnect, cluster_interconnect };
  }

  const alternatives = attachAlternatives(ctx, form, () => {
    const { regions, min_disk_gb } = shapeBody();
    return { regions, min_disk_gb };
  });
  const byModelPart = attachModelOrder(ctx, form, body, byModel);

  /** Fills the GPU, interconnect and provider choices once the catalogue has loaded. */
  form.fill = (cat) => {
    alternatives.fill(cat);
    if (providers.childElementCount) return;
    for (const m of cat.gpu_models) gpuSelect.append(h("option", { value: m.name }, `${m.name} · ${m.description}`));
    for (const i of cat.interconnects) interconnect.append(h("option", { value: i }, i));
    providers.append(...providerChecks(cat, "providers", "provider-"));
  };
  form.loadModels = () => byModelPart.load();

  /** What shows for the kind of order chosen; the cluster's own fields count only for a cluster. */
  const sync = () => {
    const model = byModel();
    for (const el of form.querySelectorAll("[data-shape-only]")) el.hidden = model;
    byModelPart.section.hidden = byModelPart.shapes.hidden = !model;
    scriptField.hidden = model && byModelPart.serving();
    clusterFields[0].disabled = !isCluster(form);
    clusterFields[1].disabled = !(isCluster(form) || alternatives.anyCluster() || model);
  };
  form.querySelector(".order-kind").after(byModelPart.section);
  form.querySelector(".providers").after(
    attachEstimate(form, ctx, estimateRequest, form.elements.max_price_per_hour), byModelPart.shapes, shapeOnly(alternatives.section));
  sync();
  form.addEventListener("input", sync);
  form.addEventListener("change", sync);
  for (const radio of form.elements.kind) {
    radio.addEventListener("change", () => clearFieldErrors(form)); // the other kind's errors no longer apply
  }
  form.addEventListener("input", (event) => recheckField(form, event));
  form.addEventListener("change", (event) => recheckField(form, event));

  /** Where the API's error about `path` shows: an alternative's at its shape, the engine's script at the engine. */
  const fieldOf = (path) => (byModel() ? byModelPart.fieldOf(path) : alternatives.fieldOf(path));

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearFieldErrors(form);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const order = await ctx.api("/v1/orders", { method: "POST", body: body(), headers: { "Idempotency-Key": idemKey } });
      idemKey = newIdempotencyKey();
      form.reset();
      alternatives.clear();
      byModelPart.reset();
      sync();
      ctx.notify(`Order placed: “${orderLabel(order)}” is waiting for stock.`);
      onPlaced(order);
    } catch (err) {
      if (err instanceof ApiError && err.status === 422) {
        const details = err.details.map((d) => ({ ...d, field: fieldOf(String(d.field || "")) }));
        showFieldErrors(form, { message: err.message, details }, "error-", (path, detail) => describeError(form, path, detail));
      }
      else if (err instanceof ApiError && err.status !== 401 && err.status !== 403) status.textContent = err.message;
      else if (err instanceof ApiError) ctx.handleError(err);
      else status.textContent = "Cannot reach the service; your order was not placed yet. Try again.";
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// ---- the view --------------------------------------------------------------------------------

export function mountOrders(root, ctx) {
  const tbody = h("tbody");
  const table = h("div", { class: "table-wrap" },
    h("table", { class: "cards" },
      h("thead", {}, h("tr", {}, COLUMNS.map(([t]) => h("th", { scope: "col" }, t || h("span", { class: "visually-hidden" }, "Actions"))))),
      tbody));
  const loading = h("p", { class: "muted" }, "Loading orders…");
  const empty = h("p", { class: "empty" }, "No orders yet. Place one above: it waits here until matching stock appears.");
  const more = h("p", { class: "muted small", hidden: true }, "Showing your latest 100 orders.");
  const title = h("h1", { tabindex: -1 }, "Orders");
  let orders = null;

  function render() {
    syncList(tbody, orders, "data-order-id", (o) => o.id, (tr, o) => renderRow(ctx, tr, o));
    showState({ loading, empty, content: table }, orders.length ? "content" : "empty");
  }

  const form = orderForm((order) => {
    if (orders && !orders.some((o) => o.id === order.id)) orders.unshift(order);
    if (orders) render();
    ctx.refresh();
  }, ctx);

  root.append(
    h("div", { class: "page-head" }, title, h("p", { class: "muted" }, "Standing orders: each deploys a machine the moment matching stock appears.")),
    form,
    h("section", { class: "card", "aria-labelledby": "orders-heading" },
      h("h2", { id: "orders-heading" }, "Your orders"), loading, empty, table, more),
  );
  showState({ loading, empty, content: table }, "loading");

  return {
    name: "Orders",
    title,
    async refresh() {
      const cat = await getCatalogue().catch(() => null);
      if (cat) form.fill(cat);
      form.loadModels(); // once; the orders need not wait for it
      const page = await ctx.api("/v1/orders?limit=100");
      orders = page.data;
      more.hidden = !page.next_cursor;
      render();
    },
    /** Redraws what changes with the clock alone ("Waiting: 42 s"), without asking the API. */
    tick() {
      if (orders) render();
    },
  };
}
