// Dashboard entry point: sign-in, hash routing, the event stream with the 2-second poll loop as
// its fallback, and shared UI (banner, notices, confirm dialog).

import { api, apiKey, ApiError, getCatalogue, NetworkError } from "./api.js";
import { duration, h, money } from "./dom.js";
import { mountOrders } from "./orders.js";
import { mountOrderDetail } from "./detail.js";
import { mountOffers } from "./offers.js";
import { mountStock } from "./stock.js";
import { mountAccount } from "./account.js";
import { mountAdmin } from "./admin.js";
import { follow } from "./live.js";

const POLL_MS = 2000;
// While the stream is open, views whose data only changes with the account's events refresh on
// each event; this slow poll only catches what no event reports (estimates, a lost event).
const LIVE_POLL_MS = 30000;
const LIVE_ROUTES = new Set(["orders", "account"]);
const EVENT_SETTLE_MS = 50; // events that come together cause one refresh
const $ = (id) => document.getElementById(id);
// Signed in with the admin key, the dashboard is the operator's view (#/admin) alone.
const ROLE_KEY = "autoprovision.role";
const isAdmin = () => sessionStorage.getItem(ROLE_KEY) === "admin";

let view = null; // the mounted view: {refresh(): Promise, title?: Element}
let viewIsLive = false; // the mounted view changes only with the account's events
let pollId = 0;
let timer = null;
let stream = null; // {stop()} while signed in
let streamOpen = false;
let eventTimer = null;

// ---- shared UI -------------------------------------------------------------------------------

function banner(text) {
  $("banner").textContent = text || "";
  $("banner").hidden = !text;
}

let noticeTimer = null;
/** A short message under the header ("Order placed.", "Could not cancel: …"). */
function notify(text, kind = "ok") {
  const el = $("notice");
  el.textContent = text;
  el.className = `notice notice-${kind}`;
  el.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => (el.hidden = true), 6000);
}

/** The confirmation <dialog>; resolves true when the user confirms. Escape or "keep" resolves false. */
function confirmDialog({ title, message, confirm, keep }) {
  const dialog = $("confirm");
  const opener = document.activeElement;
  $("confirm-title").textContent = title;
  $("confirm-message").textContent = message;
  $("confirm-ok").textContent = confirm;
  $("confirm-keep").textContent = keep;
  dialog.returnValue = "";
  dialog.showModal();
  $("confirm-keep").focus();
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (opener?.isConnected) opener.focus();
        resolve(dialog.returnValue === "ok");
      },
      { once: true },
    );
  });
}

/** Errors every view shares: a rejected key signs out, an unreachable service shows the banner. */
function handleError(err) {
  if (err instanceof ApiError && err.status === 401) return signOut("That key was not accepted.");
  if (err instanceof ApiError && err.status === 403) {
    return signOut("That is an admin key. The dashboard needs an account's API key (ap_live_…).");
  }
  if (err instanceof NetworkError) return banner("Cannot reach the service — retrying");
  banner(`The service answered with an error: ${err.message} — retrying`);
  console.warn(err);
}

const ctx = { api, notify, confirm: confirmDialog, handleError, refresh: () => startPolling() };

// ---- polling ---------------------------------------------------------------------------------

async function refreshHeader() {
  if (isAdmin()) {
    $("who").textContent = "Admin";
    $("low-balance").hidden = true;
    return;
  }
  const account = await api("/v1/account");
  $("who").textContent = `${account.name} · ${money(account.available)} available`;
  const low = $("low-balance");
  low.hidden = !account.low_balance;
  const advice = account.can_top_up
    ? [h("a", { href: "#/account" }, "Top up on the Account page"), ", "]
    : ["Ask the operator for a top-up, "];
  low.replaceChildren(...(account.low_balance
    ? [`Low balance: ${money(account.available)} available pays ${duration(account.runway_seconds * 1000)} of your ` +
       `machines (${money(account.hourly_spend)}/h). `, ...advice, "or they are terminated when an hour cannot be paid."]
    : []));
}

/** One poll chain at a time: starting a new one (route change, tab shown, action) ends the old. */
function startPolling() {
  clearTimeout(timer);
  poll(++pollId);
}

async function poll(id) {
  if (id !== pollId || !apiKey.get() || document.hidden) return;
  try {
    await Promise.all([refreshHeader(), view?.refresh()]);
    if (id === pollId) banner(null);
  } catch (err) {
    if (id === pollId) handleError(err);
  }
  const every = streamOpen && viewIsLive ? LIVE_POLL_MS : POLL_MS;
  if (id === pollId && apiKey.get()) timer = setTimeout(() => poll(id), every);
}

// ---- the event stream --------------------------------------------------------------------------

function setLive(open) {
  streamOpen = open;
  $("live").textContent = open ? "Live" : "Polling";
  $("live").dataset.state = open ? "live" : "polling";
  $("live").title = open
    ? "Changes appear the moment they happen (event stream)."
    : "The event stream is not open: refreshing every 2 seconds until it is back.";
}

function startStream() {
  stream?.stop();
  setLive(false);
  stream = follow(apiKey.get(), {
    onOpen: () => {
      setLive(true);
      startPolling(); // catch up on anything missed while it was closed
    },
    onEvent: () => {
      clearTimeout(eventTimer);
      eventTimer = setTimeout(startPolling, EVENT_SETTLE_MS);
    },
    onDrop: () => {
      setLive(false);
      startPolling();
    },
  });
}

// With the stream open the slow poll leaves clock-driven text ("Waiting: 42 s") to the view.
setInterval(() => {
  if (streamOpen && viewIsLive && !document.hidden) view?.tick?.();
}, 1000);

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && view) startPolling();
});

// ---- routing ---------------------------------------------------------------------------------

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "orders" && parts[1]) return { name: "orders", id: parts[1] };
  if (["orders", "offers", "stock", "account", "admin"].includes(parts[0]) && !parts[1]) return { name: parts[0] };
  return null;
}

function route(focusView) {
  if (!apiKey.get()) return;
  const r = parseRoute();
  const home = isAdmin() ? "#/admin" : "#/orders";
  if (!r || (r.name === "admin") !== isAdmin()) return location.replace(home);
  for (const a of document.querySelectorAll("nav a")) {
    a.hidden = (a.dataset.route === "admin") !== isAdmin();
    if (a.dataset.route === r.name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const root = $("view");
  root.replaceChildren();
  const mount = r.id ? mountOrderDetail
    : { orders: mountOrders, offers: mountOffers, stock: mountStock, account: mountAccount, admin: mountAdmin }[r.name];
  view = mount(root, ctx, r.id);
  viewIsLive = LIVE_ROUTES.has(r.name);
  document.title = `${view.name} · autoprovision`;
  if (focusView) view.title?.focus();
  startPolling();
}

window.addEventListener("hashchange", () => route(true));

// ---- sign-in ---------------------------------------------------------------------------------

function showShell(signedIn) {
  $("signin").hidden = signedIn;
  $("shell").hidden = !signedIn;
}

function signOut(message = "") {
  apiKey.clear();
  sessionStorage.removeItem(ROLE_KEY);
  stream?.stop();
  stream = null;
  clearTimeout(timer);
  pollId++;
  view = null;
  $("view").replaceChildren();
  $("who").textContent = "";
  $("low-balance").hidden = true;
  $("confirm").open && $("confirm").close();
  banner(null);
  showShell(false);
  $("signin-error").textContent = message;
  $("api-key").value = "";
  $("api-key").focus();
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("api-key").value.trim();
  const error = $("signin-error");
  error.textContent = "";
  if (!key) return (error.textContent = "Enter your API key.");
  const button = event.submitter || $("signin-form").querySelector("button");
  button.disabled = true;
  try {
    const admin = await signsInAs(key);
    apiKey.set(key);
    sessionStorage.setItem(ROLE_KEY, admin ? "admin" : "account");
    $("api-key").value = "";
    showShell(true);
    if (!admin) startStream(); // the event stream is an account's
    route(true);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) error.textContent = "That key was not accepted.";
    else if (err instanceof NetworkError) error.textContent = "Cannot reach the service. Try again in a moment.";
    else error.textContent = err.message;
  } finally {
    button.disabled = false;
  }
});

$("sign-out").addEventListener("click", () => signOut());

/** Whether `key` is the admin key (true) or an account's (false); the API's refusal otherwise. */
async function signsInAs(key) {
  try {
    await api("/v1/account", { key });
    return false;
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 403)) throw err;
    await api("/v1/admin/providers", { key }); // an admin key reads this; others are refused
    return true;
  }
}

// A service in dry run sends no creates: say so on every page (the catalogue is fetched once).
getCatalogue().then((cat) => ($("dry-run").hidden = !cat.dry_run)).catch(() => {});

if (apiKey.get()) {
  showShell(true);
  if (!isAdmin()) startStream();
  route(false);
} else {
  signOut();
}
