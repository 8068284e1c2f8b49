// Errors as the server states them (README, "HTTP API" and "WebSocket frames"): an HTTP error body
// or an `error` frame carries a stable `code` and a `detail` sentence; a refused input adds
// `errors`, one `{field, message}` per field as the client named it. The page titles the codes it
// knows and shows the server's own sentence; it never guesses a code from an HTTP status.

import { noticeMessage } from "./conversation.js";
import { asText } from "./text.js";

// The codes the page titles; any other code is "Something went wrong" with the server's detail
// (tests/web/test_frames.py checks each against the codes the server sends).
export const ERROR_TITLES = {
  model_failed: "The model provider failed",
  rate_limited: "Too many requests",
  turn_running: "A reply is still being written",
  too_large: "That message is too long",
  invalid_field: "The server did not understand that",
  invalid_chat_id: "That chat name is not valid",
  invalid_agent: "That agent name is not valid",
  not_found: "That agent or chat does not exist",
};

/** `{status, code, detail, errors}` of a refused request, from its status and JSON body (any shape). */
export function errorOf(status, body) {
  const data = body && typeof body === "object" ? body : {};
  const listed = Array.isArray(data.errors) ? data.errors : [];
  const errors = listed
    .filter((item) => item && typeof item === "object")
    .map((item) => ({ field: asText(item.field), message: asText(item.message) }))
    .filter((item) => item.message);
  const detail = typeof data.detail === "string" && data.detail ? data.detail : "";
  return {
    status,
    code: typeof data.code === "string" ? data.code : "",
    detail: detail || (errors.length ? "" : `The server answered ${status}.`),
    errors,
  };
}

/** One sentence for a person: the server's detail, then what was wrong with each field. */
export function describeError(error) {
  const fields = (error?.errors ?? []).map(({ field, message }) => (field ? `${field}: ${message}` : message));
  return [asText(error?.detail), fields.join("; ")].filter(Boolean).join(" ") || "That did not work.";
}

/** The log row of an error: its code's title (when the page knows one) over the server's detail. */
export function errorNotice({ code, detail }, { extra = "" } = {}) {
  const title = ERROR_TITLES[code] ?? "Something went wrong";
  const row = noticeMessage(title, { level: "error", detail: [asText(detail), extra].filter(Boolean).join(" ") });
  row.dataset.code = code || "error";
  return row;
}
