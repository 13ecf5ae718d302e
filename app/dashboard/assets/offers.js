// The live offers view (#/offers): what the providers show now, each provider's read status, and which orders each offer would satisfy.

import { getCatalogue, providerName } from "./api.js";
import { gpu, h, patch, perHour, shortId, showState, since, syncList, when } from "./dom.js";

function readStatus(p) {
  const name = providerName(p.provider);
  if (p.error) {
    const last = p.fetched_at ? ` Last good read ${since(p.fetched_at)} ago.` : "";
    return h("li", { class: "read read-error" }, h("strong", {}, name), ` — read failed: ${p.error}.${last}`);
  }
  if (!p.fetched_at) return h("li", { class: "read" }, h("strong", {}, name), " — not read yet");
  return h("li", { class: "read read-ok", title: when(p.fetched_at) }, h("strong", {}, name), ` — read ${since(p.fetched_at)} ago`);
}

function disk(o) {
  if (o.disk_gb === null) return "disk sized to the order";
  return `${o.disk_gb} GB disk${o.disk_fixed ? "" : " (resizable)"}`;
}

function matches(ids, names) {
  if (!ids.length) return h("span", { class: "muted" }, "—");
  return h("ul", { class: "plain" }, ids.map((id) =>
    h("li", {}, h("a", { href: `#/orders/${encodeURIComponent(id)}` }, names.get(id) || shortId(id)))));
}

function renderRow(tr, o, names) {
  const linked = o.matching_orders.map((id) => names.get(id) || "").join("|");
  patch(tr, JSON.stringify(o) + linked, () => [
    h("td", { "data-label": "Provider" }, providerName(o.provider)),
    h("td", { "data-label": "Region", class: "nowrap" }, o.region),
    h("td", { "data-label": "SKU" }, h("code", {}, o.sku)),
    h("td", { "data-label": "GPU", class: "nowrap" }, gpu(o)),
    h("td", { "data-label": "Interconnect" }, o.interconnect || "—",
      o.cluster_interconnect && h("span", { class: "muted small block" }, `nodes: ${o.cluster_interconnect}`)),
    h("td", { "data-label": "Machine" }, `${o.vcpus} vCPU · ${o.ram_gb} GB RAM`,
      h("span", { class: "muted small block" }, disk(o))),
    h("td", { "data-label": "Available", class: "num" }, o.available === null ? "in stock" : String(o.available)),
    h("td", { "data-label": "Price incl. fees", class: "num" }, h("strong", {}, perHour(o.price_per_hour_with_fees)),
      o.price_per_hour !== o.price_per_hour_with_fees && h("span", { class: "muted small block" }, `${perHour(o.price_per_hour)} + fees`)),
    h("td", { "data-label": "Would satisfy" }, matches(o.matching_orders, names)),
  ]);
}

export function mountOffers(root, ctx) {
  const title = h("h1", { tabindex: -1 }, "Offers");
  const filter = h("select", { id: "offer-gpu" }, h("option", { value: "" }, "All GPUs"));
  const reads = h("ul", { class: "reads plain", "aria-label": "Provider reads" });
  const tbody = h("tbody");
  const table = h("div", { class: "table-wrap" },
    h("table", { class: "cards" },
      h("thead", {}, h("tr", {}, ["Provider", "Region", "SKU", "GPU", "Interconnect", "Machine", "Available", "Price incl. fees", "Would satisfy"]
        .map((t) => h("th", { scope: "col" }, t)))),
      tbody));
  const loading = h("p", { class: "muted" }, "Loading offers…");
  const empty = h("p", { class: "empty" });
  const states = { loading, empty, content: table };
  let seq = 0;
  const fillFilter = (cat) => filter.length === 1 && filter.append(...cat.gpu_models.map((m) => h("option", { value: m.name }, m.name)));
  getCatalogue().then(fillFilter, () => null);

  filter.addEventListener("change", () => {
    showState(states, "loading");
    ctx.refresh();
  });

  root.append(
    h("div", { class: "page-head" }, title,
      h("p", { class: "muted" }, "What the providers show in stock right now, cheapest first, prices including fees.")),
    h("section", { class: "card" },
      h("div", { class: "toolbar" },
        h("div", { class: "field inline" }, h("label", { for: "offer-gpu" }, "Filter by GPU"), filter), reads),
      loading, empty, table),
  );
  showState(states, "loading");

  return {
    name: "Offers",
    title,
    async refresh() {
      const mine = ++seq;
      const gpuModel = filter.value;
      const query = gpuModel ? `?gpu_model=${encodeURIComponent(gpuModel)}` : "";
      const [offers, waiting, cat] = await Promise.all([
        ctx.api(`/v1/offers${query}`),
        ctx.api("/v1/orders?status=waiting&limit=100"),
        getCatalogue().catch(() => null),
      ]);
      if (mine !== seq) return; // the filter changed meanwhile; a newer answer follows
      if (cat) fillFilter(cat);
      const names = new Map(waiting.data.map((o) => [o.id, o.name || shortId(o.id)]));
      reads.replaceChildren(...offers.providers.map(readStatus));
      syncList(tbody, offers.data, "data-offer", (o) => `${o.provider}/${o.region}/${o.sku}`, (tr, o) => renderRow(tr, o, names));
      empty.textContent = gpuModel
        ? `No ${gpuModel} offers right now. They appear here the moment a provider shows some.`
        : "No offers right now. They appear here the moment a provider shows stock.";
      showState(states, offers.data.length ? "content" : "empty");
    },
  };
}
