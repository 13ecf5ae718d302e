// Ordering by model in the order form (#/orders): the model (GET /v1/models), the room its
// cache needs and an engine to serve it on boot. As they, the providers and the price change,
// the shapes the order would take (POST /v1/orders/preview), each with its cache room
// (GET /v1/models/{id}/fit) and its expected wait, and the start-up script the engine writes.

import { ApiError, providerName } from "./api.js";
import { gpu, h, perHour } from "./dom.js";
import { waitLine } from "./estimate.js";
import { describeError, field, int } from "./order_fields.js";

const DEBOUNCE_MS = 400;
const PRICE = /^\d{1,7}(\.\d{1,2})?$/;
/** What the preview takes of the order: what decides its shapes and its script. */
const PREVIEWED = ["model", "providers", "max_price_per_hour", "min_cache_gb", "serve", "regions", "min_disk_gb"];
/** What the expected wait takes of a shape. */
const MATCHED = ["gpu_model", "gpu_count", "nodes", "providers", "max_price_per_hour", "regions", "min_disk_gb",
  "interconnect", "cluster_interconnect"];

const pick = (obj, names) =>
  Object.fromEntries(names.filter((n) => obj[n] !== undefined && obj[n] !== null).map((n) => [n, obj[n]]));
const shapeKey = (s) => `${s.gpu_model}/${s.gpu_count}/${s.nodes}`;
const modelPath = (id) => id.split("/").map(encodeURIComponent).join("/");

/**
 * Adds ordering by model to an order form. `request()` gives the order's body as the form
 * would send it now; `active()` whether the form orders by model. Returns its fields
 * (`section`), the shapes with their waits and the script (`shapes`) to place in the form, and
 * what the form asks of it.
 */
export function attachModelOrder(ctx, form, request, active) {
  const picker = h("select", {}, h("option", { value: "" }, "Choose a model…"));
  const engine = h("select", {},
    h("option", { value: "" }, "None"), h("option", { value: "vllm" }, "vLLM"), h("option", { value: "sglang" }, "SGLang"));
  const note = h("p", { class: "muted", role: "status" });
  const tbody = h("tbody");
  const table = h("div", { class: "table-wrap", hidden: true },
    h("table", { class: "cards", "data-testid": "model-shapes" },
      h("caption", {}, "Shapes this order takes"),
      h("thead", {}, h("tr", {}, ["Shape", "Cache room", "Providers", "Max price", "Expected wait"].map((t) =>
        h("th", { scope: "col" }, t)))),
      tbody));
  const script = h("textarea", { id: "serve-script", rows: 12, readonly: true, spellcheck: "false" });
  const scriptBox = h("div", { class: "field", hidden: true },
    h("label", { for: "serve-script" }, "Generated boot script"), script,
    h("p", { class: "hint muted small" }, "What the machine runs when it boots: the order keeps only its size and SHA-256."));
  const section = h("div", { class: "grid by-model", hidden: true },
    field("Model", "model", picker),
    field("Min cache room (GB)", "min_cache_gb",
      h("input", { type: "number", min: 0, step: 1, value: 100, inputmode: "numeric" }),
      "Room left for the KV cache: each shape is the smallest that leaves this much."),
    field("Serve on boot", "serve", engine,
      "Starts the engine with the model when the machine boots (at the providers that run a start-up script)."));
  const shapes = h("section", { class: "estimate model-shapes", "aria-label": "Shapes this order takes", hidden: true },
    note, table, scriptBox);
  const fits = new Map(); // model id -> its shapes' cache room, by shape
  let timer = null;
  let seq = 0;
  let sent = null;

  const say = (text) => {
    seq++; // any answer still on its way is stale now
    sent = null;
    note.textContent = text;
    table.hidden = true;
    scriptBox.hidden = true;
  };

  /** The cache room of each shape the model fits, by the fit rule (null if it cannot be had). */
  async function cacheRoom(id) {
    if (!fits.has(id)) {
      const answer = await ctx.api(`/v1/models/${modelPath(id)}/fit`, { key: null }).catch(() => null);
      if (!answer) return null;
      fits.set(id, new Map(answer.shapes.map((s) => [shapeKey(s), s.cache_room_gb])));
    }
    return fits.get(id);
  }

  function render(preview, rooms) {
    note.textContent = `${preview.alternatives.length} ${preview.alternatives.length === 1 ? "shape" : "shapes"}: ` +
      "the order deploys the cheapest offer any of them matches.";
    tbody.replaceChildren(...preview.alternatives.map((a) => {
      const room = rooms?.get(shapeKey(a));
      const wait = waitLine(ctx, { "data-testid": "wait" });
      wait.show(pick(a, MATCHED));
      return h("tr", { "data-shape": shapeKey(a) },
        h("td", { "data-label": "Shape", class: "nowrap" }, gpu(a)),
        h("td", { "data-label": "Cache room", class: "num" }, room ? `${Math.floor(Number(room))} GB` : "—"),
        h("td", { "data-label": "Providers" }, a.providers.map(providerName).join(", ")),
        h("td", { "data-label": "Max price", class: "num" }, perHour(a.max_price_per_hour)),
        h("td", { "data-label": "Expected wait" }, wait));
    }));
    table.hidden = false;
    script.value = preview.startup_script || "";
    scriptBox.hidden = !preview.startup_script;
  }

  async function update() {
    if (!active()) return;
    const body = pick(request(), PREVIEWED);
    if (!body.model) return say("Choose a model to see the machines that hold it.");
    if (!body.providers.length || !PRICE.test(body.max_price_per_hour || "")) {
      return say("Choose providers and a max price to see the machines this order takes, and the wait for each.");
    }
    const key = JSON.stringify(body);
    if (key === sent) return;
    sent = key;
    const mine = ++seq;
    let preview;
    try {
      preview = await ctx.api("/v1/orders/preview", { method: "POST", body });
    } catch (err) {
      if (mine !== seq) return;
      if (err instanceof ApiError && err.status === 422) {
        // What keeps the order from taking any shape, in the form's words (placing marks the field).
        const words = (err.details.length ? err.details : [{ field: "", message: err.message }])
          .map((d) => describeError(form, String(d.field || "").split(".")[0], d));
        say(`No shape to show: ${[...new Set(words)].join(" ")}`);
      } else if (err instanceof ApiError && ![401, 403].includes(err.status)) say(`No shape to show: ${err.message}.`);
      else if (err instanceof ApiError) ctx.handleError(err);
      else say("Cannot reach the service to show the shapes.");
      return;
    }
    const rooms = await cacheRoom(body.model);
    if (mine !== seq) return; // the form changed meanwhile; a newer answer follows
    render(preview, rooms);
  }

  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(update, DEBOUNCE_MS);
  };
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);

  return {
    section,
    shapes,
    /** Fills the model choices once (GET /v1/models needs no key). */
    async load() {
      if (picker.options.length > 1) return;
      const answer = await ctx.api("/v1/models", { key: null }).catch(() => null);
      if (!answer || picker.options.length > 1) return;
      for (const m of answer.data) {
        const size = `${Math.ceil(Number(m.checkpoint_gb))} GB${m.format ? ` ${m.format}` : ""}`;
        picker.append(h("option", { value: m.id, title: m.id }, `${m.name} · ${size}`));
      }
    },
    /** Whether an engine is chosen: it writes the start-up script, so the form's own is not sent. */
    serving: () => Boolean(engine.value),
    /** The order by model from the form's body: its machine is the model's to choose. */
    request(b) {
      const { gpu_model, gpu_count, nodes, interconnect, cluster_interconnect, ...rest } = b;
      const out = { model: picker.value || undefined, ...rest };
      const room = form.elements.min_cache_gb.value.trim();
      if (room) out.min_cache_gb = int(room);
      if (engine.value) {
        out.serve = { engine: engine.value };
        delete out.startup_script;
      }
      return out;
    },
    /** Where an API error's field goes: the engine's script is said at the engine. */
    fieldOf: (path) => (engine.value && path === "startup_script" ? "serve" : path),
    reset() {
      clearTimeout(timer);
      say("");
    },
  };
}
