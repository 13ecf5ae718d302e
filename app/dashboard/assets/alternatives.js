// The order form's added shapes (#/orders, ordering a machine shape): "Add alternative" adds a
// machine the order may take instead of the form's own (up to 8 shapes in all), each with its
// expected wait; with two or more, "Prefer" says which match the order takes.

import { h } from "./dom.js";
import { waitLine } from "./estimate.js";
import { checkedProviders, errorSlot, int, providerChecks } from "./order_fields.js";

const MAX_SHAPES = 8; // the API's limit on an order's alternatives, the form's own shape included
const DEBOUNCE_MS = 400;
const WHOLE = /^\d+$/;

/**
 * Adds the alternatives to an order form. `shared()` gives what applies to every shape (the
 * form's regions and min disk). Returns the section to place in the form and what the form
 * asks of it: the request's alternatives, where the API's errors about them go, and a reset.
 */
export function attachAlternatives(ctx, form, shared) {
  const rows = h("div", { class: "alt-rows" });
  const add = h("button", { type: "button", class: "small", disabled: true, onclick: () => addRow() }, "Add alternative");
  const full = h("p", { class: "hint muted small", hidden: true }, `An order takes at most ${MAX_SHAPES} shapes.`);
  const prefer = h("select", { id: "prefer", name: "prefer", "aria-describedby": "hint-prefer error-prefer" },
    h("option", { value: "cheapest" }, "Cheapest"), h("option", { value: "listed" }, "First listed"));
  const preferField = h("div", { class: "field prefer", hidden: true },
    h("label", { for: "prefer" }, "Prefer"), prefer,
    h("p", { class: "hint muted small", id: "hint-prefer" },
      "Cheapest: the cheapest offer any shape matches. First listed: the first shape, in this order, that has a match."),
    errorSlot("prefer"));
  const section = h("section", { class: "alternatives", "aria-labelledby": "alternatives-heading" },
    h("h3", { id: "alternatives-heading" }, "Alternatives"),
    h("p", { class: "hint muted small" },
      "Other machines the order may take instead of the one above; it still deploys only one. ",
      "Regions and min disk apply to every shape; the interconnect and cluster fields to the first."),
    rows, preferField, h("div", { class: "alt-actions" }, add, full));
  let catalogue = null;
  let next = 2; // each added shape's key (alt-N) stays the same while others come and go
  let timer = null;

  const added = () => [...rows.children];
  const value = (row, name) => {
    const el = form.elements[`${row.dataset.key}.${name}`];
    return el && typeof el.value === "string" ? el.value.trim() : "";
  };

  /** Legends and the remove buttons' names follow the shapes' places: the form's own is the first. */
  function sync() {
    added().forEach((row, i) => {
      row.querySelector("legend").textContent = `Alternative ${i + 2}`;
      row.querySelector(".remove").setAttribute("aria-label", `Remove alternative ${i + 2}`);
    });
    const count = added().length;
    preferField.hidden = count === 0;
    add.disabled = !catalogue || count + 1 >= MAX_SHAPES;
    full.hidden = count + 1 < MAX_SHAPES;
  }

  function addRow() {
    const key = `alt-${next++}`;
    const name = (f) => `${key}.${f}`;
    const cell = (label, f, input) => {
      Object.assign(input, { id: name(f), name: name(f) });
      input.setAttribute("aria-describedby", `error-${name(f)}`);
      return h("div", { class: "field" }, h("label", { for: name(f) }, label), input, errorSlot(name(f)));
    };
    const gpuSelect = h("select", {}, h("option", { value: "" }, "Choose a GPU…"),
      catalogue.gpu_models.map((m) => h("option", { value: m.name }, `${m.name} · ${m.description}`)));
    const row = h("fieldset", { class: "alt-row", "data-key": key },
      h("legend", {}),
      h("div", { class: "grid" },
        cell("GPU model", "gpu_model", gpuSelect),
        cell("GPU count", "gpu_count", h("input", { type: "number", min: 1, max: 16, step: 1, value: 1, inputmode: "numeric" })),
        cell("Nodes", "nodes", h("input", { type: "number", min: 1, max: 16, step: 1, value: 1, inputmode: "numeric" })),
        cell("Max price per hour (USD, incl. fees)", "max_price_per_hour",
          h("input", { type: "text", inputmode: "decimal", placeholder: "e.g. 60.00", autocomplete: "off" }))),
      h("fieldset", { class: "providers", "aria-describedby": `error-${name("providers")}` },
        h("legend", {}, "Providers"),
        h("div", { class: "checks" }, providerChecks(catalogue, name("providers"), `${key}-provider-`)),
        errorSlot(name("providers"))),
      waitLine(ctx, { "data-testid": "alternative-wait" }),
      h("div", { class: "form-actions" },
        h("button", { type: "button", class: "small remove", onclick: () => removeRow(row) }, "Remove")));
    rows.append(row);
    sync();
    gpuSelect.focus();
  }

  function removeRow(row) {
    row.remove();
    sync();
    add.focus();
    form.dispatchEvent(new Event("change")); // the cluster fields and the request follow
  }

  /** One added shape as the API takes it; anything odd is sent as typed so the API explains it. */
  function shape(row) {
    const nodes = value(row, "nodes");
    return {
      gpu_model: value(row, "gpu_model") || undefined,
      gpu_count: value(row, "gpu_count") ? int(value(row, "gpu_count")) : undefined,
      nodes: nodes && nodes !== "1" ? int(nodes) : undefined,
      providers: checkedProviders(form, `${row.dataset.key}.providers`),
      max_price_per_hour: value(row, "max_price_per_hour") || undefined,
      ...shared(),
    };
  }

  /** Each added shape's expected wait, once its GPU, count, a provider and a price are there. */
  function updateWaits() {
    for (const row of added()) {
      const s = shape(row);
      const ready = s.gpu_model && Number.isInteger(s.gpu_count) && s.providers.length &&
        (s.nodes === undefined || Number.isInteger(s.nodes)) &&
        (s.min_disk_gb === undefined || Number.isInteger(s.min_disk_gb));
      row.querySelector("[data-testid=alternative-wait]").show(ready ? { nodes: 1, ...s } : null);
    }
  }
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(updateWaits, DEBOUNCE_MS);
  };
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);

  return {
    section,
    /** Fills the GPU and provider choices of the shapes added from now on. */
    fill(cat) {
      catalogue ??= cat;
      sync();
    },
    count: () => added().length,
    /** Whether an added shape asks for a cluster (its nodes 2 or more). */
    anyCluster: () => added().some((row) => WHOLE.test(value(row, "nodes")) && Number(value(row, "nodes")) > 1),
    /** The request with the form's own shape (`first`, its machine fields) and the added ones. */
    request(first) {
      return { alternatives: [first, ...added().map(shape)], prefer: prefer.value };
    },
    /** Where an API error's field goes: `alternatives.0.x` is the form's own `x`, `alternatives.2.x` the second added shape's. */
    fieldOf(path) {
      const m = /^alternatives\.(\d+)(?:\.(.*))?$/.exec(path);
      if (!m) return path;
      const i = Number(m[1]);
      if (i === 0) return m[2] || "alternatives";
      const row = added()[i - 1];
      return row ? [row.dataset.key, m[2]].filter(Boolean).join(".") : path;
    },
    clear() {
      clearTimeout(timer);
      rows.replaceChildren();
      prefer.value = "cheapest";
      sync();
    },
  };
}
