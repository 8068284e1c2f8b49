// The browser's copy of the canvas reducer (README, "The canvas tools"). Pure: it never mutates its input and has no
// DOM, so it can be tested on its own and mirrors the server's semantics exactly: adding an id that
// exists replaces that element in place, updates merge, `clear` removes every element but those it
// names in `keep` (the server's questions still waiting for an answer), the theme is stored beside
// the elements and notifications are never stored.

/** The element type each adding command makes. */
export const ADD_COMMANDS = Object.freeze({
  canvas_add_card: "card",
  canvas_show_text: "text",
  canvas_show_chart: "chart",
  canvas_show_table: "table",
  canvas_play_media: "media",
  canvas_show_confirmation: "confirmation",
});

export const MODES = Object.freeze(["content", "clear"]);

export function emptyState() {
  return { elements: [], mode: "content", theme: "" };
}

function hasId(params) {
  return params != null && typeof params === "object" && typeof params.id === "string" && params.id !== "";
}

/**
 * The canvas after one command. Unknown commands and invalid input leave the state as it was (the
 * server refuses them too), returning the very same object so callers can skip a re-render.
 */
export function reduce(state, command, params) {
  const current = state || emptyState();
  const input = params && typeof params === "object" ? params : {};

  if (Object.prototype.hasOwnProperty.call(ADD_COMMANDS, command)) {
    if (!hasId(input)) return current;
    const element = { ...input, type: ADD_COMMANDS[command] };
    const index = current.elements.findIndex((item) => item.id === element.id);
    const elements =
      index === -1
        ? [...current.elements, element]
        : current.elements.map((item, position) => (position === index ? element : item));
    return { ...current, elements, mode: "content" };
  }

  switch (command) {
    case "canvas_update_card": {
      if (!hasId(input)) return current;
      const index = current.elements.findIndex((item) => item.id === input.id);
      if (index === -1) return current;
      // The element keeps its type: an update changes fields, never what kind of thing it is.
      const merged = { ...current.elements[index], ...input, type: current.elements[index].type };
      const elements = current.elements.map((item, position) => (position === index ? merged : item));
      return { ...current, elements };
    }
    case "canvas_remove_element": {
      if (!hasId(input)) return current;
      if (!current.elements.some((item) => item.id === input.id)) return current;
      return { ...current, elements: current.elements.filter((item) => item.id !== input.id) };
    }
    case "canvas_set_mode": {
      if (!MODES.includes(input.mode)) return current;
      if (input.mode === "clear") {
        const keep = Array.isArray(input.keep) ? input.keep : [];
        return { ...current, elements: current.elements.filter((item) => keep.includes(item.id)), mode: "clear" };
      }
      return { ...current, mode: "content" };
    }
    case "canvas_set_theme": {
      if (typeof input.theme !== "string") return current;
      return { ...current, theme: input.theme };
    }
    case "canvas_show_notification":
      // Shown once by the page, never part of the canvas.
      return current;
    default:
      return current;
  }
}
