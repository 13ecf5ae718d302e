// REST client for the autoprovision API (the dashboard's only data source) and the stored API key.

const STORAGE_KEY = "autoprovision.apiKey";

export const apiKey = {
  get: () => sessionStorage.getItem(STORAGE_KEY),
  set: (key) => sessionStorage.setItem(STORAGE_KEY, key),
  clear: () => sessionStorage.removeItem(STORAGE_KEY),
};

/** The service answered with an error body: {error: {code, message, details?}}. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || [];
  }
}

/** The service could not be reached at all (or a proxy in front of it says so). */
export class NetworkError extends Error {}

/** Calls the API with the stored key; resolves to the parsed JSON (null for 204). */
export async function api(path, { method = "GET", body, key = apiKey.get(), headers = {} } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, cache: "no-store" };
  if (key) init.headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    throw new NetworkError("Cannot reach the service");
  }
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (res.ok) return data;
  if (!data?.error && [502, 503, 504].includes(res.status)) {
    throw new NetworkError("Cannot reach the service");
  }
  const err = data?.error || {};
  throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || res.statusText, err.details);
}

let catalogue = null;
const providerNames = new Map();

/** A provider's display name (from the catalogue) once it is loaded, else its id. */
export const providerName = (id) => providerNames.get(id) || id;

/** The GPU models, providers and interconnects (no key needed); fetched once, retried on failure. */
export function getCatalogue() {
  catalogue ??= api("/v1/catalogue", { key: null }).then((cat) => {
    for (const p of cat.providers) providerNames.set(p.id, p.name);
    return cat;
  }).catch((err) => {
    catalogue = null;
    throw err;
  });
  return catalogue;
}

/** A random Idempotency-Key (crypto.randomUUID needs a secure context, so fall back). */
export function newIdempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}
