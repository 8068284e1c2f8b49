// The chat list beside the conversation (a drawer on a narrow screen): every chat of the person, of
// every agent, newest first as GET /chats lists them, each with its title, agent and last activity,
// and Rename, Export (a download of GET /chats/export) and Delete (after a confirmation dialog).
// The shell reads the list again when the server says a chat changed (`chats_changed`).

import { withQuery } from "./api.js";
import { describeError } from "./errors.js";

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const AGES_REFRESH_MS = 60_000;
const RELOAD_DELAY_MS = 150; // a turn's frames come in bursts: one read of the list for a burst

/** A fresh chat id, valid as the README's chat-id rule says, and sortable by time. */
export function newChatId(now = new Date()) {
  const pad = (value) => String(value).padStart(2, "0");
  const stampText = `${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
  const random = Math.random().toString(36).slice(2, 6);
  return `chat-${stampText}-${random}`;
}

/** "5 minutes ago", "yesterday" … for an ISO date; "" for none. */
export function ago(isoDate) {
  const date = new Date(isoDate);
  if (!isoDate || Number.isNaN(date.getTime())) return "";
  const seconds = (date.getTime() - Date.now()) / 1000;
  if (Math.abs(seconds) < 60) return "just now";
  let value = seconds / 60;
  const steps = [
    [60, "minute"],
    [24, "hour"],
    [7, "day"],
    [4.35, "week"],
    [12, "month"],
    [Infinity, "year"],
  ];
  for (const [size, unit] of steps) {
    if (Math.abs(value) < size) return relative.format(Math.round(value), unit);
    value /= size;
  }
  return "";
}

function el(name, className, text) {
  const node = document.createElement(name);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Sets a node's text only when it differs: the node, and a selection in it, stay as they are. */
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** An icon control's accessible name and tooltip. */
function setLabel(node, label, title = label) {
  if (node.getAttribute("aria-label") !== label) node.setAttribute("aria-label", label);
  if (node.title !== title) node.title = title;
}

function iconButton(symbol, label, className) {
  const button = el("button", `btn btn-small btn-icon chat-action ${className}`);
  button.type = "button";
  button.setAttribute("aria-label", label);
  button.title = label;
  const icon = el("span", "", symbol);
  icon.setAttribute("aria-hidden", "true");
  button.append(icon);
  return button;
}

export class ChatList {
  /**
   * `urls`: `{chats, chatExport}`; `place`: the chat shown; `agentOf(id)`: an agent's details or null;
   * `titleChars`: the longest title the server keeps; `onOpen(chatId, {agent, isNew})` when the person
   * opens or starts a chat; `onDeleted(chat)` after this page deleted one; `notify(text, level)`.
   * dom: `list`, `newChat`, `dialog`, `dialogText`, `current` (the conversation's heading of its chat).
   */
  constructor({ api, urls, place, agentOf, titleChars, onOpen, onDeleted, notify, dom }) {
    this.api = api;
    this.urls = urls;
    this.place = place;
    this.agentOf = agentOf;
    this.titleChars = titleChars;
    this.onOpen = onOpen;
    this.onDeleted = onDeleted;
    this.notify = notify;
    this.dom = dom;
    this.chats = [];
    this.loaded = false;
    this.renaming = null; // the chat whose name is being edited
    this.deleting = false; // a deletion from this page is on its way
    this.reloadTimer = null;
    this.ready = Promise.resolve(); // the list the history waits for (see reload)
    dom.newChat.addEventListener("click", () => this.onOpen(newChatId(), { isNew: true }));
    // "5 minutes ago" grows older while the page stays open.
    setInterval(() => this.renaming || this.render(), AGES_REFRESH_MS);
  }

  /** Reads the list again; the history of the chat shown waits for this one. */
  reload() {
    this.ready = this.load();
    return this.ready;
  }

  /** The server said a chat changed (another tab, a scheduled prompt, this tab's own turn). */
  changed() {
    clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => this.reload(), RELOAD_DELAY_MS);
  }

  async load() {
    try {
      const { status, data } = await this.api.get(this.urls.chats);
      if (status === 200 && Array.isArray(data)) {
        this.chats = data;
        this.loaded = true;
      }
    } catch {
      return; // the list stays as it was; a reconnect reads it again
    }
    if (!this.renaming) this.render(); // never under the person typing a name (it renders after)
  }

  isShown(chat) {
    return chat.agent === this.place.agent.id && chat.chat_id === this.place.chatId;
  }

  /** The chat the page shows, as /chats lists it; null while it has no message yet. */
  get current() {
    return this.chats.find((chat) => this.isShown(chat)) ?? null;
  }

  /** Whether asking for this chat's history can answer anything but 404 (a chat exists once it has a message). */
  mayHaveHistory() {
    return !this.loaded || this.current !== null;
  }

  chatName(chat) {
    if (chat.title) return chat.title;
    if (chat.chat_id === "main") return "Main chat";
    return chat.messages ? chat.chat_id : "New chat";
  }

  /** The newest chat other than `chat` (of its agent if there is one), or null. */
  nextAfter(chat) {
    const others = this.chats.filter((other) => other.agent !== chat.agent || other.chat_id !== chat.chat_id);
    return others.find((other) => other.agent === chat.agent) ?? others[0] ?? null;
  }

  /**
   * Draws the list. A chat's row stays the same element while it is listed: what changed in it (its
   * title, its age, being the chat shown) is written into it in place. A click that lands while the
   * list is read again (a turn's `chats_changed`, a rename in another tab) reaches the link it was
   * aimed at, and the keyboard focus stays where it was. Only a row that becomes a name being edited,
   * or stops being one, or gains its actions, is drawn anew.
   */
  render() {
    this.dom.current.textContent = this.chatName(this.current ?? { chat_id: this.place.chatId, messages: 0 });
    const wanted = this.chats.map((chat) => [chat, { actions: true }]);
    if (this.current === null) {
      // The chat shown has no message yet: it heads the list until it has one.
      const fresh = { agent: this.place.agent.id, chat_id: this.place.chatId, title: "", last_message_at: null, messages: 0 };
      wanted.unshift([fresh, { actions: false }]);
    }
    if (this.renaming && !wanted.some(([chat]) => this.shape(chat, { actions: true }) === "renaming")) {
      this.renaming = null; // its chat was deleted meanwhile (elsewhere): the list follows the server again
    }
    const hadFocus = this.dom.list.contains(document.activeElement) ? document.activeElement : null;
    const focusKey = hadFocus?.closest(".chat-item")?.dataset.key;
    const focusClass = hadFocus ? [...hadFocus.classList].find((name) => name.startsWith("chat-") && name !== "chat-action") : null;
    const drawn = new Map([...this.dom.list.children].map((node) => [node.dataset.key, node]));
    const rows = wanted.map(([chat, options]) => {
      const shape = this.shape(chat, options);
      const old = drawn.get(`${chat.agent}/${chat.chat_id}`);
      if (old && old.dataset.shape === shape) {
        if (shape !== "renaming") this.fill(old, chat);
        return old;
      }
      const item = this.row(chat, options);
      item.dataset.shape = shape;
      return item;
    });
    this.arrange(rows);
    if (focusKey && !this.dom.list.contains(document.activeElement)) {
      // The focused row was drawn anew: keep the keyboard where it was.
      const item = rows.find((node) => node.dataset.key === focusKey);
      const again = item?.querySelector(`.${focusClass}`) ?? item?.querySelector(".chat-link");
      again?.focus();
    }
  }

  /** Puts `rows` in the list in order: a row already in its place stays untouched. */
  arrange(rows) {
    const list = this.dom.list;
    const keep = new Set(rows);
    for (const node of [...list.children]) if (!keep.has(node)) node.remove();
    rows.forEach((node, index) => {
      const there = list.children[index];
      if (there !== node) list.insertBefore(node, there ?? null);
    });
  }

  /** What a row is made of: a name being edited, or a link with or without the chat's actions. */
  shape(chat, { actions }) {
    if (this.renaming && this.renaming.agent === chat.agent && this.renaming.chat_id === chat.chat_id) return "renaming";
    return actions ? "link+actions" : "link";
  }

  row(chat, { actions = true } = {}) {
    const item = el("li", "chat-item");
    item.dataset.key = `${chat.agent}/${chat.chat_id}`;
    item.dataset.agent = chat.agent;
    item.dataset.chatId = chat.chat_id;
    item.chat = chat;
    if (this.shape(chat, { actions }) === "renaming") {
      item.append(this.renameForm(chat, this.chatName(chat)));
      return item;
    }
    const link = el("a", "chat-link");
    link.href = withQuery(window.location.pathname, { agent: chat.agent, chat_id: chat.chat_id });
    const meta = el("span", "chat-item-meta");
    const avatar = el("span", "chat-item-avatar");
    avatar.setAttribute("aria-hidden", "true");
    meta.append(avatar, el("span", "chat-item-agent"), el("span", "chat-item-age"));
    link.append(el("span", "chat-item-title"), meta);
    link.addEventListener("click", (event) => {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return; // a new tab: the browser's
      event.preventDefault();
      this.onOpen(item.chat.chat_id, { agent: item.chat.agent });
    });
    item.append(link);
    if (actions) item.append(this.actions(item));
    this.fill(item, chat);
    return item;
  }

  /** Writes what `chat` shows into its row (a link, with or without the actions), in place. */
  fill(item, chat) {
    item.chat = chat;
    const name = this.chatName(chat);
    const shown = this.isShown(chat);
    const link = item.querySelector(".chat-link");
    item.classList.toggle("is-current", shown);
    if (shown) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
    setText(item.querySelector(".chat-item-title"), name);
    const agent = this.agentOf(chat.agent);
    setText(item.querySelector(".chat-item-avatar"), agent?.avatar || "");
    setText(item.querySelector(".chat-item-agent"), `${agent?.name || chat.agent} · `);
    setText(item.querySelector(".chat-item-age"), chat.last_message_at ? ago(chat.last_message_at) : "no messages yet");
    const meta = item.querySelector(".chat-item-meta");
    const when = chat.last_message_at ? new Date(chat.last_message_at).toLocaleString() : "";
    if (meta.title !== when) meta.title = when;
    const box = item.querySelector(".chat-item-actions");
    if (box) {
      setLabel(box.querySelector(".chat-rename-button"), `Rename “${name}”`);
      setLabel(box.querySelector(".chat-export-link"), `Export “${name}”`, `Export “${name}” (JSON Lines)`);
      setLabel(box.querySelector(".chat-delete-button"), `Delete “${name}”`);
    }
  }

  /** Rename, Export and Delete, each for the chat its row holds when it is used. */
  actions(item) {
    const box = el("div", "chat-item-actions");
    const rename = iconButton("✎", "Rename", "chat-rename-button");
    rename.addEventListener("click", () => this.startRename(item.chat));
    const exported = el("a", "btn btn-small btn-icon chat-action chat-export-link");
    exported.href = withQuery(this.urls.chatExport, { agent: item.chat.agent, chat_id: item.chat.chat_id });
    exported.setAttribute("download", "");
    const icon = el("span", "", "⤓");
    icon.setAttribute("aria-hidden", "true");
    exported.append(icon);
    const remove = iconButton("🗑", "Delete", "chat-delete-button");
    remove.addEventListener("click", () => this.confirmDelete(item.chat, this.chatName(item.chat)));
    box.append(rename, exported, remove);
    return box;
  }

  // --- rename -----------------------------------------------------------------------------

  renameForm(chat, name) {
    const form = el("form", "chat-rename-form");
    const input = el("input", "input-small chat-rename-input");
    input.name = "title";
    input.required = true;
    input.maxLength = this.titleChars;
    input.value = name;
    input.setAttribute("aria-label", "Chat name");
    const save = el("button", "btn btn-small btn-primary", "Save");
    save.type = "submit";
    const cancel = el("button", "btn btn-small", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", () => this.endRename(chat));
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.endRename(chat);
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.saveRename(chat, input);
    });
    form.append(input, save, cancel);
    queueMicrotask(() => {
      input.focus();
      input.select();
    });
    return form;
  }

  startRename(chat) {
    this.renaming = { agent: chat.agent, chat_id: chat.chat_id };
    this.render();
  }

  endRename(chat) {
    this.renaming = null;
    this.render();
    this.focusAction(chat, ".chat-rename-button");
  }

  focusAction(chat, selector) {
    const item = [...this.dom.list.children].find((node) => node.dataset.key === `${chat.agent}/${chat.chat_id}`);
    (item?.querySelector(selector) ?? item?.querySelector(".chat-link"))?.focus();
  }

  async saveRename(chat, input) {
    const title = input.value.trim();
    if (!title) {
      input.focus();
      return;
    }
    let answer;
    try {
      answer = await this.api.send("PATCH", this.urls.chats, { agent: chat.agent, chat_id: chat.chat_id, title });
    } catch {
      this.notify("The chat could not be renamed: the server could not be reached.", "error");
      return;
    }
    const { status, data, error } = answer;
    if (status === 200 && data) {
      this.chats = this.chats.map((other) => (other.agent === data.agent && other.chat_id === data.chat_id ? data : other));
      this.endRename(chat);
      return;
    }
    this.notify(error ? describeError(error) : "The chat could not be renamed.", "error");
    input.focus();
  }

  // --- delete -----------------------------------------------------------------------------

  /** Asks in a modal dialog (Cancel has the focus), then deletes. */
  confirmDelete(chat, name) {
    const { dialog, dialogText } = this.dom;
    dialogText.textContent = `“${name}” and everything in it — its messages, notes and canvas — will be deleted for good. Export it first to keep a copy.`;
    dialog.returnValue = "";
    dialog.addEventListener(
      "close",
      () => {
        if (dialog.returnValue === "delete") this.remove(chat);
        else this.focusAction(chat, ".chat-delete-button");
      },
      { once: true },
    );
    dialog.showModal();
  }

  async remove(chat) {
    let answer;
    this.deleting = true;
    try {
      answer = await this.api.remove(this.urls.chats, { agent: chat.agent, chat_id: chat.chat_id });
    } catch {
      this.notify("The chat was not deleted: the server could not be reached.", "error");
      return;
    } finally {
      this.deleting = false;
    }
    const { status, error } = answer;
    if (status === 204 || status === 404) {
      // 404: already gone (another tab deleted it first).
      const next = this.nextAfter(chat);
      this.chats = this.chats.filter((other) => other.agent !== chat.agent || other.chat_id !== chat.chat_id);
      this.render();
      this.onDeleted(chat, next);
      return;
    }
    this.notify(error ? describeError(error) : "The chat could not be deleted.", "error");
  }
}
