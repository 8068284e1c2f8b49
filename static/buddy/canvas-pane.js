// The canvas pane: the canvas state built from the socket's `canvas_command` frames (reducer.js),
// drawn by canvas.js; versions, so a missed frame brings a replay; confirmation answers; a changed
// element brought into view (or pointed to when the canvas is out of sight); the canvas's theme.

import { isCompact, renderCanvas } from "./canvas.js";
import { emptyState, reduce } from "./reducer.js";
import { asText } from "./text.js";

export const KNOWN_THEMES = Object.freeze(["light", "dark", "sepia", "ocean"]);

// Commands that add or change an element: the page brings it into view.
const ELEMENT_COMMANDS = new Set([
  "canvas_add_card",
  "canvas_show_text",
  "canvas_show_chart",
  "canvas_show_table",
  "canvas_play_media",
  "canvas_show_confirmation",
  "canvas_update_card",
]);

/** Sets the page theme; names we do not know fall back to the system's light or dark. */
export function applyTheme(theme, root = document.documentElement) {
  const name = typeof theme === "string" ? theme.trim().toLowerCase() : "";
  if (KNOWN_THEMES.includes(name)) root.dataset.theme = name;
  else delete root.dataset.theme;
  return root.dataset.theme ?? "";
}

export class CanvasPane {
  /**
   * `send(frame)` sends a client frame (false when not connected); `notify(text, level)` shows a toast.
   * dom: `canvas`, `canvasCount`, `canvasPanel`, `canvasScroll`, `canvasPointer`, `canvasPointerText`.
   */
  constructor({ send, notify, dom }) {
    this.send = send;
    this.notify = notify;
    this.dom = dom;
    this.state = emptyState();
    this.version = null;
    this.resetOnNextClear = true;
    this.awaitingReplay = false;
    this.pendingConfirmations = new Set();
    this.focusAfterRender = null; // a confirmation just answered: keep focus on it across re-renders
    this.pointedElement = null;
    dom.canvasPointer.addEventListener("click", () => this.goToPointedElement());
    // The pointer to a canvas change is only needed while the canvas is out of sight.
    new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) this.hidePointer();
    }).observe(dom.canvasPanel);
    // Charts are drawn for the space they have: redraw them when the canvas crosses the narrow mark.
    let compact = isCompact(dom.canvas);
    new ResizeObserver(() => {
      if (isCompact(dom.canvas) !== compact) {
        compact = isCompact(dom.canvas);
        this.render();
      }
    }).observe(dom.canvas);
  }

  /** Another conversation is shown: an empty canvas until its replay arrives. */
  reset() {
    this.hidePointer();
    this.focusAfterRender = null;
    this.state = emptyState();
    this.version = null;
    this.resetOnNextClear = true;
    this.awaitingReplay = false;
    this.pendingConfirmations.clear();
    this.render();
  }

  /** A (re)connected socket replays the canvas: whatever version it starts at is the one to follow. */
  onConnected() {
    this.forgetVersion();
    this.awaitingReplay = false;
  }

  /** The socket follows another chat now: its replay starts the version count anew. */
  forgetVersion() {
    this.version = null;
    this.rebuildOnNextClear();
  }

  /** The next clear (a replay's first frame) rebuilds the canvas from nothing, the theme included. */
  rebuildOnNextClear() {
    this.resetOnNextClear = true;
  }

  /** A turn failed: answers on their way will not come. */
  dropPendingConfirmations() {
    if (!this.pendingConfirmations.size) return;
    this.pendingConfirmations.clear();
    this.render();
  }

  onCommand({ command, params, version }) {
    const isNotification = command === "canvas_show_notification";
    const isClear = command === "canvas_set_mode" && params?.mode === "clear";
    if (isClear) {
      // A replay starts with this clear (at the current version, and its elements carry the same
      // version); it rebuilds everything, the theme included.
      if (this.resetOnNextClear || this.awaitingReplay) this.state = emptyState();
      this.resetOnNextClear = false;
      this.awaitingReplay = false;
    } else if (typeof version === "number" && this.version !== null) {
      if (version > this.version + 1) {
        // A notification is never replayed: show it, then catch up on what went missing.
        if (isNotification) this.notify(asText(params?.message), params?.level);
        this.requestReplay();
        return;
      }
      // Older than what we show: already applied. (A frame at the version we have is applied again:
      // every command is idempotent, and elements of a replay arrive at the clear's version.)
      if (version < this.version) return;
    }
    if (isNotification) {
      // Never stored, but it moves the version like every canvas change.
      this.notify(asText(params?.message), params?.level);
      if (typeof version === "number" && !this.awaitingReplay) {
        this.version = Math.max(this.version ?? version, version);
      }
      return;
    }
    if (this.awaitingReplay) return;
    // A live change (not the replay that follows a connect: its elements come at the clear's version).
    const live = typeof version === "number" && this.version !== null && version > this.version;
    this.state = reduce(this.state, command, params);
    if (typeof version === "number") this.version = isClear ? version : Math.max(this.version ?? version, version);
    for (const id of [...this.pendingConfirmations]) {
      const element = this.state.elements.find((item) => item.id === id);
      if (!element || element.answered) this.pendingConfirmations.delete(id);
    }
    this.render();
    if (live && ELEMENT_COMMANDS.has(command) && typeof params?.id === "string") this.revealElement(params.id);
  }

  requestReplay() {
    if (this.awaitingReplay) return;
    this.awaitingReplay = true;
    if (!this.send({ type: "replay" })) this.awaitingReplay = false;
  }

  answerConfirmation(id, confirmed) {
    if (this.pendingConfirmations.has(id)) return;
    if (!this.send({ type: "confirmation_response", id, confirmed })) {
      this.notify("Not connected — try again in a moment.", "warning");
      return;
    }
    this.pendingConfirmations.add(id);
    this.focusAfterRender = id;
    this.render();
  }

  render() {
    const focusLost = this.focusAfterRender !== null && this.dom.canvas.contains(document.activeElement);
    renderCanvas(this.dom.canvas, this.state, {
      onConfirm: (id, confirmed) => this.answerConfirmation(id, confirmed),
      pendingConfirmations: this.pendingConfirmations,
    });
    if (this.focusAfterRender !== null) {
      // The answered confirmation is drawn anew (buttons gone): keep the keyboard on it, not on <body>.
      const node = this.elementNode(this.focusAfterRender);
      const active = document.activeElement;
      if (node && (focusLost || active === document.body || active === null || !active.isConnected)) {
        node.setAttribute("tabindex", "-1");
        node.focus({ preventScroll: true });
      }
      if (!node || node.dataset.answered) this.focusAfterRender = null;
    }
    const count = this.state.elements.length;
    this.dom.canvasCount.textContent = count === 0 ? "" : `${count} ${count === 1 ? "element" : "elements"}`;
    applyTheme(this.state.theme);
  }

  elementNode(id) {
    return [...this.dom.canvas.children].find((node) => node.dataset.id === id) ?? null;
  }

  /**
   * Brings a changed element into view: inside the canvas panel when it scrolls on its own (wide
   * screens; never the page), else — the canvas being below the chat — a pointer to it.
   */
  revealElement(id) {
    const node = this.elementNode(id);
    if (!node) return;
    const scroller = this.dom.canvasScroll;
    if (scroller.scrollHeight > scroller.clientHeight + 1) {
      const box = scroller.getBoundingClientRect();
      const place = node.getBoundingClientRect();
      if (place.top < box.top) scroller.scrollTop += place.top - box.top - 12;
      else if (place.bottom > box.bottom) scroller.scrollTop += Math.min(place.bottom - box.bottom + 12, place.top - box.top - 12);
    }
    const place = node.getBoundingClientRect();
    if (place.top >= window.innerHeight || place.bottom <= 0) {
      const title = node.querySelector(".el-title")?.textContent ?? "";
      this.pointedElement = id;
      this.dom.canvasPointerText.textContent = title ? `On the canvas: ${title}` : "New on the canvas";
      this.dom.canvasPointer.hidden = false;
    }
  }

  goToPointedElement() {
    const node = this.pointedElement ? this.elementNode(this.pointedElement) : null;
    this.hidePointer();
    const target = node ?? this.dom.canvasPanel;
    target.setAttribute("tabindex", "-1");
    target.scrollIntoView({ block: "start", behavior: window.matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    target.focus({ preventScroll: true });
  }

  hidePointer() {
    this.dom.canvasPointer.hidden = true;
    this.pointedElement = null;
  }
}
