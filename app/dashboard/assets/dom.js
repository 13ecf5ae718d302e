// Small DOM and formatting helpers. API data only ever reaches the page as text nodes (no innerHTML).

/** Creates an element: h("a", {href: "#/", class: "x", onclick: fn}, "text", child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

/** Rebuilds el's children only when sig changed (keeps focus and selection stable while polling). */
export function patch(el, sig, build) {
  if (el._sig === sig) return;
  el._sig = sig;
  el.replaceChildren(...[build()].flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

/** Keyed update of parent's children: one element per item, in items' order, reusing existing ones. */
export function syncList(parent, items, keyAttr, keyOf, render, tag = "tr") {
  const old = new Map([...parent.children].map((el) => [el.getAttribute(keyAttr), el]));
  let prev = null;
  for (const item of items) {
    const key = keyOf(item);
    let el = old.get(key);
    old.delete(key);
    if (!el) el = h(tag, { [keyAttr]: key });
    render(el, item);
    const want = prev ? prev.nextSibling : parent.firstChild;
    if (want !== el) parent.insertBefore(el, want);
    prev = el;
  }
  for (const el of old.values()) el.remove();
}

/** Shows loading / empty / content: exactly one of the three is visible. */
export function showState({ loading, empty, content }, state) {
  loading.hidden = state !== "loading";
  empty.hidden = state !== "empty";
  content.hidden = state !== "content";
}

/** "1234.5" -> "$1,234.50" without going through floating point. */
export function money(amount) {
  if (amount === null || amount === undefined) return "—";
  const [whole, frac = ""] = String(amount).replace(/^-/, "").split(".");
  const sign = String(amount).startsWith("-") ? "-" : "";
  return `${sign}$${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}.${frac.padEnd(2, "0")}`;
}

export const perHour = (amount) => `${money(amount)}/h`;

/** A duration in ms as "12 s", "3 min", "2 h 5 min" or "3 d 4 h". */
export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return m % 60 ? `${hours} h ${m % 60} min` : `${hours} h`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export const since = (iso) => duration(Date.now() - Date.parse(iso));
export const between = (from, to) => duration(Date.parse(to) - Date.parse(from));

/** A timestamp in the reader's language, in UTC on a 24-hour clock, as the timelines' sentences
 * say times ("paid until 12:49:21 UTC"): one format on every page. */
export function when(iso) {
  if (!iso) return "—";
  const shown = new Date(iso).toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    hourCycle: "h23", timeZone: "UTC",
  });
  return `${shown} UTC`;
}

export const timeEl = (iso, text = when(iso)) => h("time", { datetime: iso, title: when(iso) }, text);

/** An order's or offer's GPUs: "8x H100", or "2 x 8x H200" for a cluster of two nodes. */
export const gpu = (o) => `${o.nodes > 1 ? `${o.nodes} x ` : ""}${o.gpu_count}x ${o.gpu_model}`;

/** "ord_01m8m87z8x8css93mbqhc74dqb" -> "ord_…c74dqb" */
export const shortId = (id) => (id.length > 12 ? `${id.slice(0, id.indexOf("_") + 1)}…${id.slice(-6)}` : id);

export const orderLabel = (o) => o.name || o.id;

export const pill = (status) => h("span", { class: `pill pill-${status}` }, status);

/** A <dl> from [term, value] pairs; values may be strings or nodes. */
export const dl = (pairs) =>
  h("dl", { class: "fields" }, pairs.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value ?? "—")]));

/** The element #<prefix><path> for the longest leading part of a dotted path that has one. */
function slotFor(form, prefix, parts) {
  for (let n = parts.length; n > 0; n--) {
    const field = parts.slice(0, n).join(".");
    const slot = field && form.querySelector(`#${CSS.escape(prefix + field)}`);
    if (slot) return { field, slot };
  }
  return { field: parts[0], slot: null };
}

/**
 * Puts 422 details next to the fields they name: the longest leading part of details[].field
 * that has an element #<prefix><part> picks it (`providers.0` goes to #error-providers,
 * `alt-2.gpu_count` to its own); anything else (e.g. "body") goes to the form's alert element.
 * `describe(field, detail)` words each detail for the page (default: the API's message).
 */
export function showFieldErrors(form, err, prefix = "error-", describe = (_field, d) => d.message) {
  clearFieldErrors(form);
  const general = [];
  for (const d of err.details || []) {
    const { field, slot } = slotFor(form, prefix, String(d.field || "").split("."));
    const message = describe(field, d);
    if (!slot) {
      general.push(field && field !== "body" ? `${field}: ${message}` : message);
      continue;
    }
    if (!slot.textContent.includes(message)) {
      slot.textContent = slot.textContent ? `${slot.textContent} ${message}` : message;
    }
    for (const input of form.querySelectorAll(`[aria-describedby~="${slot.id}"]`)) {
      input.setAttribute("aria-invalid", "true");
    }
  }
  if (!err.details?.length) general.push(err.message);
  form.querySelector("[role=alert]").textContent = general.join(" ");
  const first = form.querySelector(":is(input, select, textarea)[aria-invalid=true]");
  first?.focus();
  first?.scrollIntoView({ block: "center" });
}

export function clearFieldErrors(form) {
  for (const el of form.querySelectorAll(".field-error, [role=alert]")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/** Empties one error slot (e.g. once its field is fixed) and unmarks the fields it describes. */
export function clearFieldError(form, slot) {
  slot.textContent = "";
  for (const input of form.querySelectorAll(`[aria-describedby~="${slot.id}"]`)) {
    input.removeAttribute("aria-invalid");
  }
}
