// The order form's fields and their errors in words for people: shared by the form (orders.js),
// its added shapes (alternatives.js) and ordering by model (model_order.js).

import { clearFieldError, h } from "./dom.js";

const AMOUNT = /^\d+(\.\d{1,2})?$/;
const WHOLE = /^\d+$/;
const REGION = /^[\w.-]+$/;
const SCRIPT_BYTES = 32768; // the API's limit on a start-up script, in UTF-8 bytes

/** A field's own name, the last part of its path: `alt-2.max_price_per_hour` is a `max_price_per_hour`. */
const leaf = (path) => path.slice(path.lastIndexOf(".") + 1);

/**
 * Per field, what is wrong with its value as a person would be told, or "" when nothing this
 * page can see is. The API decides (it checks more); these word its refusals and tell when a
 * refused field has been fixed. `path` is the field's name in the form (an added shape's
 * fields are named `alt-N.<field>`).
 */
const CHECKS = {
  gpu_model: (v) => (v ? "" : "Choose a GPU model."),
  gpu_count: (v) => (WHOLE.test(v) && Number(v) >= 1 && Number(v) <= 16 ? "" : "Enter a whole number of GPUs, from 1 to 16."),
  nodes: (v) => (!v || (WHOLE.test(v) && Number(v) >= 1 && Number(v) <= 16) ? "" : "Enter a whole number of nodes, from 1 to 16."),
  providers: (_v, form, path) => (form.querySelector(`input[name="${CSS.escape(path)}"]:checked`) ? "" : "Choose at least one provider."),
  max_price_per_hour: (v) => {
    if (!v) return "Enter the most you will pay per hour, e.g. 46.50.";
    return AMOUNT.test(v) ? "" : "Enter an amount in USD with at most two decimals, e.g. 46.50.";
  },
  regions: (v) => (v.split(",").map((r) => r.trim()).filter(Boolean).every((r) => REGION.test(r))
    ? ""
    : "Write region names with letters, digits, dots and dashes, separated by commas, e.g. FIN-01, CANADA-1."),
  min_disk_gb: (v) => (!v || (WHOLE.test(v) && Number(v) >= 1) ? "" : "Enter a whole number of GB, 1 or more, or leave it empty."),
  expires_at: (v) => (!v || Date.parse(v) > Date.now() ? "" : "Choose a time in the future, or leave it empty."),
  name: (v) => (v.length <= 100 ? "" : "Keep the name to 100 characters."),
  startup_script: (v) => {
    if (v.includes("\0")) return "Remove the NUL character from the script.";
    const size = new TextEncoder().encode(v).length;
    return size <= SCRIPT_BYTES ? "" : `Keep the script to ${SCRIPT_BYTES} bytes (it has ${size}).`;
  },
  max_runtime_hours: (v) => (!v || (AMOUNT.test(v) && Number(v) > 0)
    ? ""
    : "Enter a number of hours above 0 with at most two decimals, e.g. 12 or 0.5, or leave it empty."),
  max_total_usd: (v, form) => {
    if (!v) return "";
    if (!AMOUNT.test(v)) return "Enter an amount in USD with at most two decimals, e.g. 500, or leave it empty.";
    const price = form.elements.max_price_per_hour.value.trim();
    return AMOUNT.test(price) && Number(v) < Number(price)
      ? "Make it at least the max price per hour: the first hour is paid when the machine deploys."
      : "";
  },
  model: (v) => (v ? "" : "Choose a model."),
  min_cache_gb: (v) => (!v || (WHOLE.test(v) && Number(v) <= 100000)
    ? ""
    : "Enter a whole number of GB, from 0 to 100000, or leave it empty for 100."),
};

/** What people call the fields the API names. */
const LABELS = {
  gpu_model: "GPU model", gpu_count: "GPU count", max_price_per_hour: "max price per hour", min_disk_gb: "min disk",
  expires_at: "expiry time", max_runtime_hours: "max runtime", max_total_usd: "max total", ssh_public_key: "SSH public key",
  cluster_interconnect: "cluster interconnect", on_node_lost: "if a node is lost", startup_script: "start-up script",
  min_cache_gb: "min cache room",
};

/** Pydantic's own wording ("Field required", "List should have at least 1 item after validation"). */
const GENERIC = /^(Field required|Input should|List should|String should|Value error|Decimal input|Extra inputs)/;

const fieldValue = (form, path) => {
  const el = form.elements[path];
  return el && typeof el.value === "string" ? el.value.trim() : "";
};

/** What this page sees wrong with a field's value, or "". */
const problemOf = (form, path) => CHECKS[leaf(path)]?.(fieldValue(form, path), form, path) ?? "";

/** One refused field's message: this page's words when it sees the problem, else the API's made into a sentence. */
export function describeError(form, path, detail) {
  const seen = problemOf(form, path);
  if (seen) return seen;
  if (GENERIC.test(detail.message)) return "This value is not accepted; check it.";
  let text = detail.message;
  for (const [name, label] of Object.entries(LABELS)) text = text.replaceAll(name, label);
  text = text[0].toUpperCase() + text.slice(1);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

/** As a field showing an error changes: its message follows the value, and goes once the value is fixed. */
export function recheckField(form, event) {
  const path = event.target.name;
  const slot = path && form.querySelector(`#error-${CSS.escape(path)}`);
  if (!slot || !slot.textContent) return;
  const problem = problemOf(form, path);
  if (problem) slot.textContent = problem;
  else clearFieldError(form, slot);
}

export const errorSlot = (path) => h("p", { class: "field-error", id: `error-${path}` });

/** A labelled field: the input named and identified by `id`, described by its hint and its error. */
export function field(label, id, input, hint) {
  input.id = id;
  input.name = id;
  input.setAttribute("aria-describedby", hint ? `hint-${id} error-${id}` : `error-${id}`);
  return h("div", { class: "field" }, h("label", { for: id }, label), input,
    hint && h("p", { class: "hint muted small", id: `hint-${id}` }, hint), errorSlot(id));
}

/** A value as the API takes it: a whole number as a number, anything else as typed (the API explains it). */
export const int = (s) => (WHOLE.test(s) ? Number(s) : s);

/** The provider checkboxes, named `name`, from the catalogue (a provider without credentials here is shown, off). */
export function providerChecks(cat, name, idPrefix) {
  return cat.providers.map((p) => {
    const id = `${idPrefix}${p.id}`;
    const off = p.enabled === false; // no credentials on this service: it cannot deploy there
    return h("label", { class: "check", for: id },
      h("input", { type: "checkbox", id, name, value: p.id, "aria-describedby": `error-${name}`, ...(off && { disabled: "" }) }),
      off ? `${p.name} (not available here)` : p.name);
  });
}

/** The providers checked under `name`. */
export const checkedProviders = (form, name) =>
  [...form.querySelectorAll(`input[name="${CSS.escape(name)}"]:checked`)].map((c) => c.value);
