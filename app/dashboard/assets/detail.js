// The order detail view (#/orders/<id>): the order's fields, its deployment and its timeline of events.

import { ApiError, getCatalogue, providerName } from "./api.js";
import { dl, gpu, h, money, orderLabel, patch, perHour, pill, syncList, timeEl, when } from "./dom.js";
import { TERMINABLE, cancelOrder, isDeadAttempt, terminateOrder } from "./orders.js";

const ENDED_BECAUSE = {
  requested: "terminated by you",
  admin: "terminated by the operator",
  unpaid: "a billing hour was not paid within the grace",
  max_runtime: "its max runtime was reached",
  max_total: "its max total was reached",
};

const any = (value, none = "Any") => (value === null || value === undefined || value === "" ? none : value);

// `8x B300 on <provider names>, up to $50.00/h`: one of an order's alternatives.
const shape = (a) => `${gpu(a)} on ${a.providers.map(providerName).join(", ")}, up to ${perHour(a.max_price_per_hour)}`;

function alternativesField(o) {
  if (!(o.alternatives?.length > 1)) return null;
  const which = o.prefer === "listed" ? "the first listed that shows" : "the cheapest that shows";
  return ["Alternatives", h("div", { "data-testid": "alternatives" },
    h("ol", {}, o.alternatives.map((a) => h("li", {}, shape(a)))),
    h("p", { class: "muted" }, `Deploys one of them: ${which}.`))];
}

function orderFields(o) {
  const one = !(o.alternatives?.length > 1); // else the alternatives say what it may take
  return dl(([
    ["Status", pill(o.status)],
    o.model && ["Model", h("span", { "data-testid": "model" }, o.serve_engine ? `${o.model}, served with ${o.serve_engine}` : o.model)],
    alternativesField(o),
    one && ["GPU", gpu(o)],
    one && ["Providers", o.providers.map(providerName).join(", ")],
    one && ["Max price (incl. fees)", perHour(o.max_price_per_hour)],
    one && ["Regions", o.regions?.length ? o.regions.join(", ") : "Any"],
    one && ["Min disk", o.min_disk_gb ? `${o.min_disk_gb} GB` : "Any"],
    one && ["Interconnect", any(o.interconnect)],
    o.nodes > 1 && ["Nodes", `${o.nodes} (one cluster; the max price is for all of it)`],
    o.nodes > 1 && ["Cluster interconnect", any(o.cluster_interconnect)],
    o.nodes > 1 && ["If a node is lost", o.on_node_lost === "terminate" ? "terminate the cluster" : "keep the rest"],
    ["Expires", o.expires_at ? when(o.expires_at) : "Never"],
    ["Max runtime", o.max_runtime_hours ? `${o.max_runtime_hours} h` : "None"],
    ["Max total (incl. fees)", o.max_total_usd ? money(o.max_total_usd) : "None"],
    o.terminate_reason && ["Why it ended", ENDED_BECAUSE[o.terminate_reason] || o.terminate_reason],
    ["SSH key", o.ssh_public_key ? h("code", { class: "wrap" }, o.ssh_public_key) : "None"],
    ["Start-up script", o.startup_script_bytes == null ? "None"
      : h("span", { "data-testid": "startup-script" }, `${o.startup_script_bytes} bytes, SHA-256 `,
        h("code", { class: "wrap" }, o.startup_script_sha256))],
    ["Placed", when(o.created_at)],
    ["Last change", when(o.updated_at)],
    ["Order id", h("code", { class: "wrap" }, o.id)],
  ]).filter(Boolean));
}

function deploymentFields(o) {
  const d = o.deployment;
  if (!d && ["cancelled", "expired", "failed", "terminated"].includes(o.status)) return h("p", { class: "empty" }, `No machine: the order is ${o.status}.`);
  if (!d) return h("p", { class: "empty" }, "No machine yet. The order deploys one as soon as matching stock appears.");
  const note = isDeadAttempt(d) &&
    h("p", { class: "muted" }, `The latest try did not give a machine (${d.status.replace("_", " ")}); see the timeline.`);
  return [note, dl([
    o.alternatives?.length > 1 && ["Alternative", h("span", { "data-testid": "alternative" }, `${d.alternative}: ${shape(o.alternatives[d.alternative - 1])}`)],
    ["Provider", providerName(d.provider)],
    ["Region", d.region],
    ["Instance type", h("code", {}, d.instance_type)],
    ["Price (incl. fees)", perHour(d.price_per_hour_with_fees)],
    ["Provider's price", perHour(d.price_per_hour)],
    o.login_ip
      ? ["Login IP", h("code", { "data-testid": "login-ip" }, o.login_ip)]
      : ["IP address", d.ip ? h("code", {}, d.ip) : "pending"],
    o.ssh_command && ["Connect", h("code", { class: "wrap", "data-testid": "ssh-command" }, o.ssh_command)],
    o.serve_tunnel && [`Reach ${o.serve_engine}`, h("code", { class: "wrap", "data-testid": "serve-tunnel" }, o.serve_tunnel)],
    ["Running since", o.running_since ? when(o.running_since) : "—"],
    ["Paid until", o.paid_until && !o.ended_at ? when(o.paid_until) : "—"],
    [o.ended_at ? "Cost in all (incl. fees)" : "Cost so far (incl. fees)", h("span", { "data-testid": "charged" }, money(o.charged_usd))],
    o.terminates_at && ["Terminates at", when(o.terminates_at)],
    o.ended_at && ["Ended", when(o.ended_at)],
    ["Machine status", any(d.status, "unknown")],
    ["Provider VM id", d.provider_vm_id ? h("code", { class: "wrap" }, d.provider_vm_id) : "pending"],
    ["Created", when(d.created_at)],
  ].filter(Boolean)), machinesTable(o)];
}

/** The deployment's machines, one row each: the VM, or each node of a cluster (its IP inside the cluster). */
function machinesTable(o) {
  if (!o.machines?.length) return null;
  const cluster = o.nodes > 1;
  return h("div", { class: "table-wrap machines" },
    h("table", { class: "cards compact", "data-testid": "machines" },
      h("caption", {}, cluster ? `Nodes (${o.machines.length})` : "Machine"),
      h("thead", {}, h("tr", {}, ["Provider VM id", cluster ? "IP in the cluster" : "IP", "State"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, o.machines.map((m) => h("tr", {},
        h("td", { "data-label": "Provider VM id" }, h("code", { class: "wrap" }, m.provider_vm_id)),
        h("td", { "data-label": "IP" }, m.ip ? h("code", {}, m.ip) : "—"),
        h("td", { "data-label": "State", title: m.provider_status || null }, m.state))))));
}

/** The timeline with each run of billed hours as its newest line alone, which says how many
 * hours that run paid (the ledger on the Account page lists each). */
export function foldBilled(events) {
  const folded = [];
  let run = 0;
  for (const e of events) {
    run = e.kind === "billed" ? run + 1 : 0;
    if (run > 1) folded.pop();
    folded.push(run > 1 ? { ...e, message: `${e.message} (${run} hours paid in a row; the ledger lists each)` } : e);
  }
  return folded;
}

export function mountOrderDetail(root, ctx, id) {
  const title = h("h1", { tabindex: -1 }, "Order");
  const actions = h("div", { class: "head-actions" });
  const fields = h("div", {}, h("p", { class: "muted" }, "Loading the order…"));
  const deployment = h("div");
  const timeline = h("ol", { class: "timeline", "data-testid": "timeline" });
  const noEvents = h("p", { class: "muted" }, "Loading the timeline…");
  const path = `/v1/orders/${encodeURIComponent(id)}`;

  root.append(
    h("p", { class: "crumbs" }, h("a", { href: "#/orders" }, "← All orders")),
    h("div", { class: "page-head row" }, title, actions),
    h("div", { class: "detail-grid" },
      h("section", { class: "card", "aria-labelledby": "h-order" }, h("h2", { id: "h-order" }, "Order"), fields),
      h("section", { class: "card", "aria-labelledby": "h-dep" }, h("h2", { id: "h-dep" }, "Deployment"), deployment),
      h("section", { class: "card span-2", "aria-labelledby": "h-tl" },
        h("h2", { id: "h-tl" }, "Timeline"), noEvents, timeline)),
  );

  return {
    name: "Order",
    title,
    async refresh() {
      await getCatalogue().catch(() => null);
      let order, events;
      try {
        [order, events] = await Promise.all([ctx.api(path), ctx.api(`${path}/events`)]);
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        title.textContent = "Order not found";
        fields.replaceChildren(h("p", { class: "empty" }, "There is no order with this id in your account."));
        deployment.replaceChildren();
        noEvents.textContent = "";
        return;
      }
      title.textContent = orderLabel(order);
      document.title = `${orderLabel(order)} · autoprovision`;
      patch(actions, order.status, () => [
        pill(order.status),
        order.status === "waiting" && h("button", { type: "button", onclick: () => cancelOrder(ctx, order) }, "Cancel"),
        TERMINABLE.includes(order.status) &&
          h("button", { type: "button", class: "danger-outline", onclick: () => terminateOrder(ctx, order) }, "Terminate"),
      ]);
      patch(fields, JSON.stringify(order), () => orderFields(order));
      patch(deployment, JSON.stringify(order), () => deploymentFields(order));
      syncList(timeline, foldBilled(events), "data-event-id", (e) => e.id, (li, e) =>
        patch(li, e.id, () => [timeEl(e.created_at), h("span", { class: `kind kind-${e.kind}` }, e.message)]), "li");
      noEvents.textContent = events.length ? "" : "No events yet.";
      noEvents.hidden = events.length > 0;
    },
  };
}
