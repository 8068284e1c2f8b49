// Search across all the person's chats (README: "Search all chats", `GET /search`): a search field in
// `#chat-search-slot`, focused by Ctrl-K / ⌘K, and below it a list of results, each a link that opens
// its chat at that message (`?agent=&chat_id=&around=`, sources.js). The list is a plain list of links:
// Tab or the arrow keys move through it, Escape closes it and returns to the field.

import { sourceHref } from "./sources.js";

const DEBOUNCE_MS = 250;
const LIMIT = 20;
const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
const isMac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent || "");

function el(name, className, text) {
  const node = document.createElement(name);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * A snippet as parts `{text, match}`: the server marks matched words between `[` and `]` and escapes a
 *  `[`, `]` or `\` of the text itself with a backslash (README: "HTTP API").
 */
export function snippetParts(snippet) {
  const parts = [];
  let text = "";
  let match = false;
  const flush = () => {
    if (text) parts.push({ text, match });
    text = "";
  };
  for (let index = 0; index < snippet.length; index += 1) {
    const char = snippet[index];
    if (char === "\\" && index + 1 < snippet.length) {
      index += 1;
      text += snippet[index];
    } else if (char === "[" && !match) {
      flush();
      match = true;
    } else if (char === "]" && match) {
      flush();
      match = false;
    } else {
      text += char;
    }
  }
  flush();
  return parts;
}

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : dateFormat.format(date);
}

export class ChatSearch {
  /**
   * `slot`: the element to fill; `url`: `GET /search`; `agentName(slug)`: the name to show for an
   * agent; `notify(text, level)`: a toast for a failure that is not the person's input.
   */
  constructor({ api, url, slot, agentName = (slug) => slug, notify = () => {} }) {
    this.api = api;
    this.url = url;
    this.agentName = agentName;
    this.notify = notify;
    this.sequence = 0; // each query's number: an answer to an older one is dropped
    this.timer = null;
    this.lastQuery = "";
    this.build(slot);
    document.addEventListener("keydown", (event) => this.onGlobalKey(event));
    document.addEventListener("pointerdown", (event) => {
      if (!this.root.contains(event.target)) this.close();
    });
  }

  build(slot) {
    const root = el("form", "chat-search");
    root.setAttribute("role", "search");
    // Named without "chat" or "message": those name the chat picker and the message box (tests and
    // assistive technology look them up by a part of their name).
    root.setAttribute("aria-label", "Search everything");
    root.noValidate = true;
    const label = el("label", "visually-hidden", "Search everything");
    label.htmlFor = "chat-search";
    const input = el("input", "chat-search-input");
    Object.assign(input, { id: "chat-search", type: "search", name: "q", autocomplete: "off", spellcheck: false });
    input.maxLength = 1000;
    input.placeholder = "Search all chats";
    input.setAttribute("aria-keyshortcuts", "Control+K Meta+K");
    input.setAttribute("aria-controls", "chat-search-results");
    const shortcut = el("kbd", "chat-search-key", isMac ? "⌘K" : "Ctrl K");
    shortcut.setAttribute("aria-hidden", "true");
    const panel = el("div", "chat-search-panel");
    panel.id = "chat-search-results";
    panel.hidden = true;
    const status = el("p", "chat-search-status");
    status.id = "chat-search-status";
    status.setAttribute("role", "status");
    const list = el("ul", "chat-search-list");
    list.setAttribute("aria-label", "Results");
    panel.append(status, list);
    root.append(label, input, shortcut, panel);
    slot.replaceChildren(root);
    Object.assign(this, { root, input, panel, status, list });

    input.addEventListener("input", () => this.schedule());
    // A click on the field shows the last results again (focus alone does not: Escape returns it there).
    input.addEventListener("click", () => {
      if (this.list.children.length || this.status.textContent) this.open();
    });
    input.addEventListener("keydown", (event) => this.onInputKey(event));
    root.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(true);
    });
    list.addEventListener("keydown", (event) => this.onListKey(event));
  }

  onGlobalKey(event) {
    if ((event.ctrlKey || event.metaKey) && !event.altKey && !event.shiftKey && event.key.toLowerCase() === "k") {
      event.preventDefault();
      this.input.focus();
      this.input.select();
    }
  }

  onInputKey(event) {
    if (event.key === "ArrowDown" && this.list.children.length) {
      event.preventDefault();
      this.open();
      this.links()[0]?.focus();
    } else if (event.key === "Escape") {
      if (!this.panel.hidden) {
        event.preventDefault();
        this.close();
      } else if (this.input.value) {
        event.preventDefault();
        this.input.value = "";
        this.clear();
      }
    }
  }

  onListKey(event) {
    const links = this.links();
    const index = links.indexOf(document.activeElement);
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = index + (event.key === "ArrowDown" ? 1 : -1);
      if (next < 0) this.input.focus();
      else links[Math.min(next, links.length - 1)]?.focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      this.close();
      this.input.focus();
    } else if (event.key === "Home" || event.key === "End") {
      event.preventDefault();
      (event.key === "Home" ? links[0] : links[links.length - 1])?.focus();
    }
  }

  links() {
    return [...this.list.querySelectorAll("a")];
  }

  open() {
    this.panel.hidden = false;
  }

  close() {
    this.panel.hidden = true;
  }

  clear() {
    this.sequence += 1;
    this.lastQuery = "";
    this.list.replaceChildren();
    this.status.textContent = "";
    this.close();
  }

  schedule() {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.run(false), DEBOUNCE_MS);
  }

  /** Searches for the field's text; `now`: asked for (Enter), so the same text is searched again. */
  async run(now) {
    window.clearTimeout(this.timer);
    const query = this.input.value.trim();
    if (!query) {
      this.clear();
      return;
    }
    if (query === this.lastQuery && !now) return;
    this.lastQuery = query;
    const sequence = ++this.sequence;
    this.status.textContent = "Searching…";
    this.open();
    let answer;
    try {
      answer = await this.api.get(this.url, { q: query, limit: String(LIMIT) });
    } catch {
      answer = null;
    }
    if (sequence !== this.sequence) return; // a newer query is under way, or the field was cleared
    if (!answer || answer.error) {
      this.list.replaceChildren();
      const detail = answer?.error?.detail;
      this.status.textContent = detail ? `Search failed: ${detail}` : "Search failed: the server did not answer.";
      if (!answer) this.notify("Search failed: the server did not answer.", "error");
      return;
    }
    this.show(answer.data?.results ?? [], query);
  }

  show(results, query) {
    this.list.replaceChildren(...results.map((result) => this.item(result)));
    const count = results.length;
    this.status.textContent =
      count === 0
        ? `Nothing found for “${query}”.`
        : `${count === LIMIT ? `The best ${count}` : count} ${count === 1 ? "message" : "messages"} for “${query}”.`;
    this.open();
  }

  item(result) {
    const item = el("li", "chat-search-item");
    const link = el("a", "chat-search-link");
    link.href = sourceHref(result);
    const head = el("span", "chat-search-head");
    const title = el("span", "chat-search-chat", result.chat_title || result.chat_id);
    const meta = el("span", "chat-search-meta");
    const time = el("time", "", when(result.created_at));
    time.dateTime = String(result.created_at ?? "");
    meta.append(`${this.agentName(result.agent)} · ${result.role === "user" ? "You" : "Reply"} · `, time);
    head.append(title, el("span", "visually-hidden", ", "), meta);
    const snippet = el("span", "chat-search-snippet");
    for (const part of snippetParts(String(result.snippet ?? ""))) {
      snippet.append(part.match ? el("mark", "", part.text) : part.text);
    }
    link.append(head, el("span", "visually-hidden", ": "), snippet);
    item.append(link);
    return item;
  }
}
