// A field of a frame or an answer as text: the server sends strings, but the page never trusts a
// field's type enough to show an object as "[object Object]" or to fail on null.

export function asText(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}
