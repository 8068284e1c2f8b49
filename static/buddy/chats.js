// The chat picker: the person's chats with this agent (as GET /chats lists them), a new chat, and
// renaming the chat shown.

import { describeError } from "./errors.js";

const TITLE_SHOWN_CHARS = 28; // of a chat's name in the picker (20 on a narrow screen), so the label always fits
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** A fresh chat id, valid as the README's chat-id rule says, and sortable by time. */
export function newChatId(now = new Date()) {
  const pad = (value) => String(value).padStart(2, "0");
  const stampText = `${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
  const random = Math.random().toString(36).slice(2, 6);
  return `chat-${stampText}-${random}`;
}

function shorten(text, limit) {
  const chars = [...text];
  return chars.length > limit ? `${chars.slice(0, limit - 1).join("").trimEnd()}…` : text;
}

function ago(isoDate) {
  const date = new Date(isoDate);
  if (!isoDate || Number.isNaN(date.getTime())) return "";
  const seconds = (date.getTime() - Date.now()) / 1000;
  const steps = [
    [60, "second"],
    [60, "minute"],
    [24, "hour"],
    [7, "day"],
    [4.35, "week"],
    [12, "month"],
    [Infinity, "year"],
  ];
  let value = seconds;
  for (const [size, unit] of steps) {
    if (Math.abs(value) < size) return relative.format(Math.round(value), unit);
    value /= size;
  }
  return "";
}

export class ChatPicker {
  /**
   * `url`: the API's chats path; `place`: the chat shown; `titleChars`: the longest title the server
   * keeps; `onOpen(chatId, {isNew})` when the person picks or starts a chat; `notify(text, level)`.
   * dom: `select`, `picker`, `newChat`, `renameChat`, `renameForm`, `renameInput`, `renameCancel`.
   */
  constructor({ api, url, place, titleChars, onOpen, notify, dom }) {
    this.api = api;
    this.url = url;
    this.place = place;
    this.notify = notify;
    this.dom = dom;
    this.chats = [];
    this.loaded = false;
    this.ready = Promise.resolve(); // the chat list the history waits for (see reload)
    dom.renameInput.maxLength = titleChars;
    dom.select.addEventListener("change", () => onOpen(dom.select.value, { isNew: false }));
    dom.newChat.addEventListener("click", () => onOpen(newChatId(), { isNew: true }));
    dom.renameChat.addEventListener("click", () => this.startRename());
    dom.renameForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.saveRename();
    });
    dom.renameCancel.addEventListener("click", () => this.endRename());
    dom.renameInput.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.endRename();
      }
    });
  }

  /** Reads the list again; the history of the chat shown waits for this one. */
  reload() {
    this.ready = this.load();
    return this.ready;
  }

  async load() {
    try {
      const { status, data } = await this.api.get(this.url);
      if (status === 200 && Array.isArray(data)) {
        this.chats = data;
        this.loaded = true;
      }
    } catch {
      return;
    }
    this.render();
  }

  /** The chat the page shows, as /chats lists it; null while it has no message yet. */
  get current() {
    const { agent, chatId } = this.place;
    return this.chats.find((chat) => chat.agent === agent.id && chat.chat_id === chatId) ?? null;
  }

  /** Whether asking for this chat's history can answer anything but 404 (a chat exists once it has a message). */
  mayHaveHistory() {
    return !this.loaded || this.current !== null;
  }

  chatName(chat, limit) {
    if (chat.title) return shorten(chat.title, limit);
    if (chat.chat_id === "main") return "Main chat";
    return chat.messages ? shorten(chat.chat_id, limit) : "New chat";
  }

  render() {
    const { select } = this.dom;
    const { agent, chatId } = this.place;
    const mine = this.chats.filter((chat) => chat.agent === agent.id);
    if (!mine.some((chat) => chat.chat_id === chatId)) {
      mine.unshift({ agent: agent.id, chat_id: chatId, title: "", last_message_at: null, messages: 0 });
    }
    const narrow = window.matchMedia("(max-width: 560px)").matches;
    select.replaceChildren(
      ...mine.map((chat) => {
        const option = document.createElement("option");
        option.value = chat.chat_id;
        option.textContent = this.chatName(chat, narrow ? 20 : TITLE_SHOWN_CHARS);
        // The whole name and when it was last used, for a pointer that rests on the picker.
        option.dataset.hint = [chat.title, chat.last_message_at ? `active ${ago(chat.last_message_at)}` : ""]
          .filter(Boolean)
          .join(" · ");
        return option;
      }),
    );
    select.value = chatId;
    select.title = select.selectedOptions[0]?.dataset.hint ?? "";
    this.dom.renameChat.disabled = this.current === null;
  }

  startRename() {
    const chat = this.current;
    if (!chat) return;
    const { renameInput } = this.dom;
    renameInput.value = chat.title || (chat.chat_id === "main" ? "Main chat" : chat.chat_id);
    this.dom.picker.hidden = true;
    this.dom.renameForm.hidden = false;
    renameInput.focus();
    renameInput.select();
  }

  endRename() {
    this.dom.renameForm.hidden = true;
    this.dom.picker.hidden = false;
    this.dom.renameChat.focus();
  }

  async saveRename() {
    const title = this.dom.renameInput.value.trim();
    if (!title) {
      this.dom.renameInput.focus();
      return;
    }
    const { status, data, error } = await this.api.send("PATCH", this.url, { ...this.place.chat(), title });
    if (status === 200 && data) {
      this.chats = this.chats.map((chat) => (chat.agent === data.agent && chat.chat_id === data.chat_id ? data : chat));
      this.render();
      this.endRename();
      return;
    }
    this.notify(error ? describeError(error) : "The chat could not be renamed.", "error");
  }
}
