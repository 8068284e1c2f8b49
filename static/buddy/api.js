// The page's HTTP client of the API (README, "HTTP API"): JSON both ways with the session cookie
// and, for writes, its CSRF token. Every call answers `{status, data, error}`: `data` is the JSON
// body of a success, `error` the `{code, detail, errors}` of a refusal (errors.js). A 401 hands
// over to `onUnauthorized` (the login page). A network failure rejects, as fetch does.

import { errorOf } from "./errors.js";

/** `url` with the query `params` (an object or URLSearchParams). */
export function withQuery(url, params) {
  const query = new URLSearchParams(params).toString();
  return query ? `${url}?${query}` : url;
}

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]")?.value ?? "";
}

export class Api {
  constructor({ onUnauthorized }) {
    this.onUnauthorized = onUnauthorized;
  }

  get(url, params = null) {
    return this.request(params ? withQuery(url, params) : url, {});
  }

  send(method, url, body) {
    return this.request(url, {
      method,
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
  }

  remove(url, params) {
    return this.request(withQuery(url, params), { method: "DELETE", headers: { "X-CSRFToken": csrfToken() } });
  }

  async request(url, { headers = {}, ...options }) {
    const response = await fetch(url, {
      ...options,
      headers: { Accept: "application/json", ...headers },
      credentials: "same-origin",
    });
    if (response.status === 401) {
      this.onUnauthorized();
      return { status: 401, data: null, error: errorOf(401, null) };
    }
    let body = null;
    const json = (response.headers.get("content-type") || "").includes("application/json");
    if (json && response.status !== 204) body = await response.json(); // 204: no body at all
    if (response.ok) return { status: response.status, data: body, error: null };
    return { status: response.status, data: null, error: errorOf(response.status, body) };
  }
}
