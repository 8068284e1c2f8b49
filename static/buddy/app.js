// The page: wires the socket, the conversation log, the canvas and the controls together.
// Frames and endpoints as the README's "HTTP API" says (realtime/frames.py models every frame).

import { isCompact, renderCanvas } from "./canvas.js";
import {
  addFailureChip,
  addSources,
  addToolChip,
  assistantMessage,
  historyMessage,
  noticeMessage,
  setAssistantText,
  stamp,
  toolFailureRow,
  userMessage,
} from "./conversation.js";
import { MemoryView } from "./memory.js";
import { emptyState, reduce } from "./reducer.js";
import { ReconnectingSocket, socketUrl } from "./socket.js";

export const KNOWN_THEMES = Object.freeze(["light", "dark", "sepia", "ocean"]);
const HISTORY_PAGE = 50;
const CLOSE_LOGGED_OUT = 4401; // the server closes every socket of a user who logged out
const CHAT_ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const TOAST_LEVELS = ["info", "success", "warning", "error"];
const MAX_FRAME_BYTES = 65536; // a bigger prompt goes over HTTP (POST /prompt), which answers as the API does
const TITLE_CHARS = 28; // of a chat's name in the picker (20 on a narrow screen), so the label always fits
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
const DEMO_PROMPT = `CANVAS: ${JSON.stringify([
  { name: "canvas_add_card", input: { id: "welcome", title: "Hello from the canvas", body: "Cards, **charts**, tables and more appear here." } },
  {
    name: "canvas_show_chart",
    input: {
      id: "visitors",
      title: "Visitors this week",
      chart_type: "bar",
      labels: ["Mon", "Tue", "Wed", "Thu", "Fri"],
      series: [{ name: "Visitors", values: [120, 180, 150, 210, 240] }],
    },
  },
])}`;

/** Sets the page theme; names we do not know fall back to the system's light or dark. */
export function applyTheme(theme, root = document.documentElement) {
  const name = typeof theme === "string" ? theme.trim().toLowerCase() : "";
  if (KNOWN_THEMES.includes(name)) root.dataset.theme = name;
  else delete root.dataset.theme;
  return root.dataset.theme ?? "";
}

/** A fresh chat id, valid as the README's chat-id rule says, and sortable by time. */
export function newChatId(now = new Date()) {
  const pad = (value) => String(value).padStart(2, "0");
  const stampText = `${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
  const random = Math.random().toString(36).slice(2, 6);
  return `chat-${stampText}-${random}`;
}

function asText(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

const ERROR_TITLES = {
  model_failed: "The model provider failed",
  rate_limited: "Too many requests",
  turn_running: "A reply is still being written",
  too_large: "That message is too long",
  invalid_field: "The server did not understand that",
  not_found: "That agent or chat does not exist",
};

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

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

class BuddyApp {
  constructor(config, dom) {
    this.config = config;
    this.dom = dom;
    this.agents = [];
    this.chats = [];
    this.agent = { id: config.defaultAgent, name: config.defaultAgentName || "Buddy", avatar: config.defaultAgentAvatar || "🤖" };
    this.chatId = config.defaultChatId;
    this.restorePreferences();
    this.aroundId = null; // a message to open the conversation at (a link to a source: ?around=ID)
    this.readLocation();
    this.memory = new MemoryView(this, {
      panel: dom.memoryPanel,
      canvasPanel: dom.canvasPanel,
      chatList: dom.memoryChat,
      profileList: dom.memoryProfile,
      count: dom.memoryCount,
      showMemory: dom.showMemory,
      showCanvas: dom.showCanvas,
    });

    this.canvas = emptyState();
    this.canvasVersion = null;
    this.resetOnNextClear = true;
    this.awaitingReplay = false;
    this.awaitingSwitch = false;
    this.pendingConfirmations = new Set();

    this.running = false;
    this.streamRow = null;
    this.streamText = "";
    this.turnTexts = []; // text already shown in earlier rows of the running turn (rounds of tool calls)
    this.failureRow = null;
    this.chatsLoaded = false;
    this.chatsPromise = Promise.resolve();
    this.focusAfterRender = null; // a confirmation just answered: keep focus on it across re-renders
    this.pendingRow = null;
    this.shownIds = new Set();
    this.shownToolUseIds = new Set(); // tool calls shown live (their frames carry no message id)
    this.nextBefore = null;
    this.loadingEarlier = false;
    this.historyGeneration = 0;
    this.failedConnects = 0;

    this.socket = new ReconnectingSocket(() => socketUrl(window.location, { agent: this.agent.id, chatId: this.chatId }), {
      onFrame: (frame) => this.onFrame(frame),
      onOpen: (info) => this.onOpen(info),
      onClose: (info) => this.onClose(info),
      onStatus: (status, detail) => this.showConnection(status, detail),
    });
  }

  // --- start-up and preferences ------------------------------------------------------------

  get preferenceKey() {
    return `buddy.last.${this.config.user?.username ?? ""}`;
  }

  restorePreferences() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(this.preferenceKey) || "null");
      if (saved && typeof saved.agent === "string" && saved.agent) this.agent = { id: saved.agent, name: saved.agent, avatar: "" };
      if (saved && typeof saved.chatId === "string" && CHAT_ID.test(saved.chatId)) this.chatId = saved.chatId;
    } catch {
      // Storage may be unavailable (private mode) or hold junk: the defaults do.
    }
  }

  /** `/?agent=A&chat_id=C&around=ID` (a link to an archived message) opens that chat at that message. */
  readLocation() {
    const params = new URLSearchParams(window.location.search);
    const agent = params.get("agent");
    const chatId = params.get("chat_id");
    const around = Number(params.get("around"));
    if (agent) this.agent = { id: agent, name: agent, avatar: "" };
    if (chatId && CHAT_ID.test(chatId)) this.chatId = chatId;
    if (Number.isInteger(around) && around > 0) this.aroundId = around;
    if (agent || chatId) this.savePreferences();
  }

  savePreferences() {
    try {
      window.localStorage.setItem(this.preferenceKey, JSON.stringify({ agent: this.agent.id, chatId: this.chatId }));
    } catch {
      // Not remembering the last chat is fine.
    }
  }

  start() {
    this.bindControls();
    this.renderCanvasNow();
    this.renderChatOptions();
    this.updateTitle();
    this.setRunning(false);
    this.socket.start();
    this.chatsPromise = this.loadChats();
    this.loadHistory();
    this.loadAgents();
  }

  bindControls() {
    const { composer, message, stop, agentSelect, chatSelect, newChat, logScroll, loadEarlier, tryDemo, reconnectNow } = this.dom;
    composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.sendPrompt();
    });
    message.addEventListener("keydown", (event) => {
      // Enter sends, Shift+Enter adds a line; never while an input method is composing a character.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        this.sendPrompt();
      }
    });
    message.addEventListener("input", () => this.autosize());
    stop.addEventListener("click", () => this.cancelTurn());
    agentSelect.addEventListener("change", () => this.switchAgent(agentSelect.value));
    chatSelect.addEventListener("change", () => this.openChat(chatSelect.value));
    newChat.addEventListener("click", () => this.openChat(newChatId(), { isNew: true }));
    this.dom.renameChat.addEventListener("click", () => this.startRename());
    this.dom.renameForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.saveRename();
    });
    this.dom.renameCancel.addEventListener("click", () => this.endRename());
    this.dom.renameInput.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        this.endRename();
      }
    });
    this.dom.canvasPointer.addEventListener("click", () => this.goToCanvasElement());
    // The pointer to a canvas change is only needed while the canvas is out of sight.
    new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) this.hideCanvasPointer();
    }).observe(this.dom.canvasPanel);
    logScroll.addEventListener("scroll", () => {
      if (logScroll.scrollTop < 80) this.loadEarlierMessages();
    });
    loadEarlier.addEventListener("click", () => this.loadEarlierMessages());
    tryDemo?.addEventListener("click", () => {
      message.value = DEMO_PROMPT;
      this.autosize();
      message.focus();
    });
    reconnectNow.addEventListener("click", () => this.socket.reconnect());
    this.dom.showMemory.addEventListener("click", () => this.memory.show(true));
    this.dom.showCanvas.addEventListener("click", () => this.memory.show(false));
    this.dom.backToLatest.addEventListener("click", () => this.leaveAround());
    // Charts are drawn for the space they have: redraw them when the canvas crosses the narrow mark.
    let compact = isCompact(this.dom.canvas);
    new ResizeObserver(() => {
      if (isCompact(this.dom.canvas) !== compact) {
        compact = isCompact(this.dom.canvas);
        this.renderCanvasNow();
      }
    }).observe(this.dom.canvas);
  }

  // --- HTTP ------------------------------------------------------------------------------------

  getJson(url) {
    return this.request(url, {});
  }

  csrfToken() {
    return document.querySelector("input[name=csrfmiddlewaretoken]")?.value ?? "";
  }

  sendJson(method, url, body) {
    return this.request(url, {
      method,
      headers: { "Content-Type": "application/json", "X-CSRFToken": this.csrfToken() },
      body: JSON.stringify(body),
    });
  }

  /** `{status, data}` of a request to the API: JSON data when the answer is JSON; a 401 goes to the login page. */
  async request(url, { headers = {}, ...options }) {
    const response = await fetch(url, {
      ...options,
      headers: { Accept: "application/json", ...headers },
      credentials: "same-origin",
    });
    if (response.status === 401) {
      this.goToLogin();
      return { status: 401, data: null };
    }
    let data = null;
    const json = (response.headers.get("content-type") || "").includes("application/json");
    if (json && response.status !== 204) data = await response.json(); // 204: no body at all
    return { status: response.status, data };
  }

  goToLogin() {
    window.location.assign(`${this.config.loginUrl}?next=${encodeURIComponent(window.location.pathname)}`);
  }

  async loadAgents() {
    try {
      const { status, data } = await this.getJson(this.config.urls.agents);
      if (status !== 200 || !Array.isArray(data)) return;
      this.agents = data;
    } catch {
      return;
    }
    const select = this.dom.agentSelect;
    select.replaceChildren(
      ...this.agents.map((agent) => {
        const option = document.createElement("option");
        option.value = agent.id;
        option.textContent = agent.avatar ? `${agent.avatar}  ${agent.name}` : agent.name;
        return option;
      }),
    );
    const known = this.agents.find((agent) => agent.id === this.agent.id);
    if (known) {
      this.agent = { ...known };
      select.value = known.id;
      this.updateTitle();
      this.refreshAgentBubbles();
    } else if (this.agents.length) {
      // The remembered agent is gone: fall back to the default (or the first one there is).
      const fallback = this.agents.find((agent) => agent.id === this.config.defaultAgent) ?? this.agents[0];
      this.switchAgent(fallback.id);
    }
  }

  async loadChats() {
    try {
      const { status, data } = await this.getJson(this.config.urls.chats);
      if (status === 200 && Array.isArray(data)) {
        this.chats = data;
        this.chatsLoaded = true;
      }
    } catch {
      return;
    }
    this.renderChatOptions();
  }

  /** The chat the page shows, as /chats lists it; null while it has no message yet. */
  get currentChat() {
    return this.chats.find((chat) => chat.agent === this.agent.id && chat.chat_id === this.chatId) ?? null;
  }

  chatName(chat, limit = TITLE_CHARS) {
    if (chat.title) return shorten(chat.title, limit);
    if (chat.chat_id === "main") return "Main chat";
    return chat.messages ? shorten(chat.chat_id, limit) : "New chat";
  }

  renderChatOptions() {
    const select = this.dom.chatSelect;
    const mine = this.chats.filter((chat) => chat.agent === this.agent.id);
    if (!mine.some((chat) => chat.chat_id === this.chatId)) {
      mine.unshift({ agent: this.agent.id, chat_id: this.chatId, title: "", last_message_at: null, messages: 0 });
    }
    const narrow = window.matchMedia("(max-width: 560px)").matches;
    select.replaceChildren(
      ...mine.map((chat) => {
        const option = document.createElement("option");
        option.value = chat.chat_id;
        option.textContent = this.chatName(chat, narrow ? 20 : TITLE_CHARS);
        // The whole name and when it was last used, for a pointer that rests on the picker.
        option.dataset.hint = [chat.title, chat.last_message_at ? `active ${ago(chat.last_message_at)}` : ""]
          .filter(Boolean)
          .join(" · ");
        return option;
      }),
    );
    select.value = this.chatId;
    select.title = select.selectedOptions[0]?.dataset.hint ?? "";
    this.dom.renameChat.disabled = this.currentChat === null;
  }

  // --- renaming a chat ---------------------------------------------------------------------

  startRename() {
    const chat = this.currentChat;
    if (!chat) return;
    this.dom.renameInput.value = chat.title || (chat.chat_id === "main" ? "Main chat" : chat.chat_id);
    this.dom.chatPicker.hidden = true;
    this.dom.renameForm.hidden = false;
    this.dom.renameInput.focus();
    this.dom.renameInput.select();
  }

  endRename() {
    this.dom.renameForm.hidden = true;
    this.dom.chatPicker.hidden = false;
    this.dom.renameChat.focus();
  }

  async saveRename() {
    const title = this.dom.renameInput.value.trim();
    if (!title) {
      this.dom.renameInput.focus();
      return;
    }
    const { status, data } = await this.sendJson("PATCH", this.config.urls.chats, {
      agent: this.agent.id,
      chat_id: this.chatId,
      title,
    });
    if (status === 200 && data) {
      this.chats = this.chats.map((chat) => (chat.agent === data.agent && chat.chat_id === data.chat_id ? data : chat));
      this.renderChatOptions();
      this.endRename();
      return;
    }
    this.showToast(asText(data?.detail) || "The chat could not be renamed.", "error");
  }

  /** Whether asking for this chat's history can answer anything but 404 (a chat exists once it has a message). */
  chatMayHaveHistory() {
    return !this.chatsLoaded || this.currentChat !== null;
  }

  async fetchHistory(before, around = null) {
    const params = new URLSearchParams({ agent: this.agent.id, chat_id: this.chatId, limit: String(HISTORY_PAGE) });
    if (before !== null && before !== undefined) params.set("before", String(before));
    if (around !== null) params.set("around", String(around));
    const { status, data } = await this.getJson(`${this.config.urls.history}?${params}`);
    // A chat that does not exist yet is a 404: it simply has no history.
    if (status === 404) return { messages: [], next_before: null };
    if (status !== 200 || !data || !Array.isArray(data.messages)) throw new Error(`history answered ${status}`);
    return data;
  }

  rowsFor(messages) {
    const fragment = document.createDocumentFragment();
    for (const message of messages) {
      if (message.id !== undefined && this.shownIds.has(String(message.id))) continue;
      if (this.shownLive(message)) continue;
      const row = historyMessage(message, this.agent);
      if (message.id !== undefined) this.shownIds.add(String(message.id));
      if (row) fragment.append(row);
    }
    return fragment;
  }

  /** Whether a page of history holds a message already shown live: tool calls, or their results. */
  shownLive(message) {
    const blocks = Array.isArray(message.content) ? message.content : [];
    const ids = blocks
      .filter((block) => block && (block.type === "tool_use" || block.type === "tool_result"))
      .map((block) => (block.type === "tool_use" ? block.id : block.tool_use_id));
    const hasText = blocks.some((block) => block && block.type === "text" && block.text);
    return ids.length > 0 && !hasText && ids.every((id) => this.shownToolUseIds.has(id));
  }

  /** Shows the newest page of this chat's archive; called on start, on every reconnect and switch. */
  async loadHistory() {
    const generation = ++this.historyGeneration;
    this.dom.log.replaceChildren();
    this.shownIds.clear();
    this.shownToolUseIds.clear();
    this.streamRow = null;
    this.streamText = "";
    this.turnTexts = [];
    this.failureRow = null;
    this.pendingRow = null;
    this.nextBefore = null;
    this.dom.loadEarlier.hidden = true;
    this.dom.logScroll.setAttribute("aria-busy", "true");
    this.updateEmpty();
    // The chat list first: a chat that does not exist yet has no history to ask for (only a 404).
    await this.chatsPromise;
    if (generation !== this.historyGeneration) return;
    if (!this.chatMayHaveHistory()) {
      this.dom.logScroll.removeAttribute("aria-busy");
      this.updateEmpty();
      return;
    }
    let page;
    const around = this.aroundId;
    try {
      page = await this.fetchHistory(null, around);
    } catch {
      if (generation !== this.historyGeneration) return;
      this.dom.logScroll.removeAttribute("aria-busy");
      this.appendRow(noticeMessage("Couldn't load this conversation's history.", { level: "error", detail: "It will load again when the connection comes back." }));
      return;
    }
    if (generation !== this.historyGeneration) return;
    this.dom.logScroll.removeAttribute("aria-busy");
    this.dom.log.prepend(this.rowsFor(page.messages));
    this.setNextBefore(page.next_before);
    this.updateEmpty();
    this.dom.backToLatest.hidden = around === null;
    const target = around === null ? null : this.dom.log.querySelector(`[data-message-id="${around}"]`);
    if (target) {
      target.classList.add("is-linked");
      target.id = `message-${around}`;
      target.scrollIntoView({ block: "center" });
    } else {
      this.scrollToBottom(true);
    }
  }

  /** From a page around a linked message back to the newest messages. */
  leaveAround() {
    this.aroundId = null;
    const url = new URL(window.location.href);
    url.searchParams.delete("around");
    url.hash = "";
    window.history.replaceState(null, "", url);
    this.loadHistory();
  }

  setNextBefore(value) {
    this.nextBefore = value === null || value === undefined ? null : value;
    this.dom.loadEarlier.hidden = this.nextBefore === null;
  }

  async loadEarlierMessages() {
    if (this.nextBefore === null || this.loadingEarlier) return;
    const generation = this.historyGeneration;
    this.loadingEarlier = true;
    const button = this.dom.loadEarlier;
    button.textContent = "Loading earlier messages…";
    button.disabled = true;
    try {
      const page = await this.fetchHistory(this.nextBefore);
      if (generation !== this.historyGeneration) return;
      const scroller = this.dom.logScroll;
      // Keep what the reader is looking at in place while older messages appear above it.
      const fromBottom = scroller.scrollHeight - scroller.scrollTop;
      this.dom.log.prepend(this.rowsFor(page.messages));
      scroller.scrollTop = scroller.scrollHeight - fromBottom;
      this.setNextBefore(page.next_before);
      this.updateEmpty();
    } catch {
      // The button stays, so the reader can try again.
    } finally {
      this.loadingEarlier = false;
      button.textContent = "Load earlier messages";
      button.disabled = false;
    }
  }

  // --- switching agent and chat -----------------------------------------------------------

  prepareForOtherConversation() {
    this.hideCanvasPointer();
    this.focusAfterRender = null;
    this.canvas = emptyState();
    this.canvasVersion = null;
    this.resetOnNextClear = true;
    this.awaitingReplay = false;
    this.pendingConfirmations.clear();
    this.renderCanvasNow();
    this.setRunning(false);
  }

  switchAgent(agentId) {
    const agent = this.agents.find((item) => item.id === agentId);
    if (!agent || agent.id === this.agent.id) {
      this.dom.agentSelect.value = this.agent.id;
      return;
    }
    this.agentBeforeSwitch = this.agent;
    this.agent = { ...agent };
    this.dom.agentSelect.value = agent.id;
    this.savePreferences();
    this.updateTitle();
    this.prepareForOtherConversation();
    if (this.socket.send({ type: "switch_agent", agent: agent.id })) {
      // Until the server confirms, frames still belong to the old agent's conversation.
      this.awaitingSwitch = true;
    } else {
      this.socket.reconnect();
    }
    this.renderChatOptions();
    this.aroundId = null;
    this.loadHistory();
    this.memory.refresh();
  }

  openChat(chatId, { isNew = false } = {}) {
    if (!CHAT_ID.test(chatId) || (chatId === this.chatId && !isNew)) return;
    this.chatId = chatId;
    this.aroundId = null;
    this.memory.refresh();
    this.savePreferences();
    this.prepareForOtherConversation();
    this.awaitingSwitch = false;
    this.socket.reconnect();
    this.renderChatOptions();
    this.loadHistory();
    if (isNew) this.dom.message.focus();
  }

  /** After a reconnect: the chat list first, then the history it may have. */
  refreshConversation() {
    this.chatsPromise = this.loadChats();
    this.loadHistory();
  }

  // --- the socket -------------------------------------------------------------------------

  onOpen({ reconnected }) {
    this.failedConnects = 0;
    this.canvasVersion = null;
    this.resetOnNextClear = true;
    this.awaitingReplay = false;
    this.awaitingSwitch = false;
    if (reconnected) {
      // Messages may have been written while we were away: read the archive again.
      this.refreshConversation();
    }
  }

  onClose({ code }) {
    if (code === CLOSE_LOGGED_OUT) {
      this.socket.stop();
      this.goToLogin();
      return;
    }
    this.failedConnects += 1;
    this.finishStream();
    this.setRunning(false);
    if (this.failedConnects === 2 || this.failedConnects % 5 === 0) this.checkSignedIn();
  }

  async checkSignedIn() {
    // A refused handshake looks like any network error to the browser; if we were logged out
    // (maybe in another tab), going back to the login page beats retrying forever.
    try {
      await this.getJson(this.config.urls.agents);
    } catch {
      // The server is down: keep retrying.
    }
  }

  showConnection(status, detail = {}) {
    const pill = this.dom.connection;
    pill.dataset.status = status;
    const labels = {
      connecting: "Connecting…",
      open: "Connected",
      waiting: `Reconnecting in ${Math.max(1, Math.round((detail.delay ?? 0) / 1000))} s…`,
      stopped: "Disconnected",
    };
    this.dom.connectionText.textContent = labels[status] ?? status;
    this.dom.reconnectNow.hidden = status !== "waiting";
    document.body.dataset.connection = status;
  }

  onFrame(frame) {
    if (this.awaitingSwitch && frame.type !== "agent_switch" && frame.type !== "error") return;
    switch (frame.type) {
      case "canvas_command":
        this.onCanvasCommand(frame);
        break;
      case "user_message":
        this.onUserMessage(frame);
        break;
      case "tool_use":
        this.onToolUse(frame);
        break;
      case "tool_result":
        this.onToolResult(frame);
        break;
      case "assistant_delta":
        this.onAssistantDelta(frame);
        break;
      case "assistant_message":
        this.onAssistantMessage(frame);
        break;
      case "agent_switch":
        this.onAgentSwitch(frame);
        break;
      case "error":
        this.onError(frame);
        break;
      default:
        break; // frames this page does not know are ignored, so the server may add some
    }
  }

  onCanvasCommand({ command, params, version }) {
    const isNotification = command === "canvas_show_notification";
    const isClear = command === "canvas_set_mode" && params?.mode === "clear";
    if (isClear) {
      // A replay starts with this clear (at the current version, and its elements carry the same
      // version); it rebuilds everything, the theme included.
      if (this.resetOnNextClear || this.awaitingReplay) this.canvas = emptyState();
      this.resetOnNextClear = false;
      this.awaitingReplay = false;
    } else if (typeof version === "number" && this.canvasVersion !== null) {
      if (version > this.canvasVersion + 1) {
        // A notification is never replayed: show it, then catch up on what went missing.
        if (isNotification) this.showToast(asText(params?.message), params?.level);
        this.requestReplay();
        return;
      }
      // Older than what we show: already applied. (A frame at the version we have is applied again:
      // every command is idempotent, and elements of a replay arrive at the clear's version.)
      if (version < this.canvasVersion) return;
    }
    if (isNotification) {
      // Never stored, but it moves the version like every canvas change.
      this.showToast(asText(params?.message), params?.level);
      if (typeof version === "number" && !this.awaitingReplay) {
        this.canvasVersion = Math.max(this.canvasVersion ?? version, version);
      }
      return;
    }
    if (this.awaitingReplay) return;
    // A live change (not the replay that follows a connect: its elements come at the clear's version).
    const live = typeof version === "number" && this.canvasVersion !== null && version > this.canvasVersion;
    this.canvas = reduce(this.canvas, command, params);
    if (typeof version === "number") this.canvasVersion = isClear ? version : Math.max(this.canvasVersion ?? version, version);
    for (const id of [...this.pendingConfirmations]) {
      const element = this.canvas.elements.find((item) => item.id === id);
      if (!element || element.answered) this.pendingConfirmations.delete(id);
    }
    this.renderCanvasNow();
    if (live && ELEMENT_COMMANDS.has(command) && typeof params?.id === "string") this.revealElement(params.id);
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

  goToCanvasElement() {
    const node = this.pointedElement ? this.elementNode(this.pointedElement) : null;
    this.hideCanvasPointer();
    const target = node ?? this.dom.canvasPanel;
    target.setAttribute("tabindex", "-1");
    target.scrollIntoView({ block: "start", behavior: window.matchMedia("(prefers-reduced-motion: reduce)").matches ? "auto" : "smooth" });
    target.focus({ preventScroll: true });
  }

  hideCanvasPointer() {
    this.dom.canvasPointer.hidden = true;
    this.pointedElement = null;
  }

  requestReplay() {
    if (this.awaitingReplay) return;
    this.awaitingReplay = true;
    if (!this.socket.send({ type: "replay" })) this.awaitingReplay = false;
  }

  onUserMessage({ text, message_id: messageId, kind }) {
    const id = messageId === undefined || messageId === null ? null : String(messageId);
    if (id !== null && this.shownIds.has(id)) return;
    if (id !== null) this.shownIds.add(id);
    const pending = this.pendingRow;
    const now = new Date().toISOString();
    this.turnTexts = [];
    this.failureRow = null;
    if (pending && (kind ?? "typed") === "typed" && pending.querySelector(".msg-text")?.textContent === text) {
      // Our own prompt, now started (and archived) by the server.
      delete pending.dataset.pending;
      if (id !== null) pending.dataset.messageId = id;
      stamp(pending, now);
      this.pendingRow = null;
    } else {
      // A prompt from another tab, a confirmation answer or a scheduled prompt.
      this.finishStream();
      this.appendRow(userMessage(asText(text), { messageId: id, createdAt: now, kind: asText(kind) || "typed" }));
    }
    this.setRunning(true);
    this.ensureStreamRow();
  }

  onToolUse({ id, name }) {
    // A tool call belongs to the assistant message being written: its chip goes on that row.
    this.failureRow = null;
    if (typeof id === "string") this.shownToolUseIds.add(id);
    const row = this.ensureStreamRow();
    addToolChip(row, asText(name));
    this.setRunning(true);
    this.scrollToBottom();
  }

  onToolResult({ is_error: isError, summary }) {
    // The round's results close the row of its calls; the model's next words start a new one.
    const row = this.streamRow;
    if (row && row.querySelector(".msg-tools")) this.closeStreamRow();
    if (isError) {
      if (!this.failureRow || !this.failureRow.isConnected) {
        this.failureRow = toolFailureRow();
        stamp(this.failureRow, new Date().toISOString());
        const waiting = this.streamRow && !this.streamText ? this.streamRow : null;
        if (waiting) this.dom.log.insertBefore(this.failureRow, waiting);
        else this.appendRow(this.failureRow);
      }
      addFailureChip(this.failureRow, asText(summary));
    }
    this.ensureStreamRow();
    this.scrollToBottom();
  }

  /** Ends the row being written as an archived assistant message looks after a reload. */
  closeStreamRow() {
    const row = this.streamRow;
    if (!row) return;
    setAssistantText(row, this.streamText, { streaming: false });
    stamp(row, new Date().toISOString());
    if (this.streamText) this.turnTexts.push(this.streamText);
    else if (row.querySelector(".msg-tools")) row.classList.add("msg-tools-only");
    else row.remove();
    this.streamRow = null;
    this.streamText = "";
  }

  ensureStreamRow() {
    if (this.streamRow) return this.streamRow;
    this.streamText = "";
    this.streamRow = assistantMessage(this.agent, "", { streaming: true });
    this.appendRow(this.streamRow);
    return this.streamRow;
  }

  onAssistantDelta({ text }) {
    this.failureRow = null;
    const row = this.ensureStreamRow();
    this.streamText += asText(text);
    setAssistantText(row, this.streamText, { streaming: true });
    this.setRunning(true);
    this.scrollToBottom();
  }

  onAssistantMessage({ text, message_id: messageId, sources }) {
    this.memory.refresh(); // the turn may have changed a note
    const id = messageId === undefined || messageId === null ? null : String(messageId);
    if (id !== null && this.shownIds.has(id)) {
      // Shown already (a prompt sent over HTTP is ended by its answer, which can arrive before the
      // socket's frames): deltas that came after it are the same text again.
      if (this.streamRow && !this.streamRow.dataset.messageId) this.streamRow.remove();
      this.streamRow = null;
      this.streamText = "";
      this.turnTexts = [];
      this.setRunning(false);
      return;
    }
    // The frame's text is the whole turn's; rows of earlier rounds already show their part of it.
    let finalText = asText(text) || this.streamText;
    const earlier = this.turnTexts.join("\n\n");
    if (earlier) finalText = this.streamText || (finalText.startsWith(earlier) ? finalText.slice(earlier.length).trim() : "");
    const row = this.streamRow ?? assistantMessage(this.agent, "", { streaming: true });
    if (!row.isConnected) this.appendRow(row);
    setAssistantText(row, finalText, { streaming: false });
    stamp(row, new Date().toISOString());
    if (id !== null) {
      row.dataset.messageId = id;
      this.shownIds.add(id);
    }
    if (!finalText) {
      if (row.querySelector(".msg-tools")) row.classList.add("msg-tools-only");
      else row.remove();
    }
    addSources(row, sources);
    this.streamRow = null;
    this.streamText = "";
    this.turnTexts = [];
    this.failureRow = null;
    this.setRunning(false);
    this.updateEmpty();
    this.scrollToBottom();
    this.loadChats();
  }

  onAgentSwitch({ agent }) {
    this.awaitingSwitch = false;
    if (agent && typeof agent.id === "string") {
      const changed = agent.id !== this.agent.id;
      this.agent = { id: agent.id, name: asText(agent.name) || agent.id, avatar: asText(agent.avatar) };
      if (!this.agents.some((item) => item.id === agent.id)) this.agents.push({ ...this.agent });
      this.dom.agentSelect.value = agent.id;
      this.savePreferences();
      this.updateTitle();
      if (changed) {
        this.renderChatOptions();
        this.loadHistory();
      }
    }
    this.canvasVersion = null;
    this.resetOnNextClear = true;
  }

  onError({ code, detail }) {
    const errorCode = asText(code) || "error";
    const detailText = asText(detail);
    if (this.awaitingSwitch) {
      this.awaitingSwitch = false;
      if (errorCode === "not_found" && this.agentBeforeSwitch) {
        // The server kept the socket on the previous agent: show that conversation again.
        this.agent = this.agentBeforeSwitch;
        this.dom.agentSelect.value = this.agent.id;
        this.savePreferences();
        this.updateTitle();
        this.renderChatOptions();
        this.loadHistory();
        this.resetOnNextClear = true;
        this.socket.send({ type: "replay" });
      }
    }
    if (errorCode === "turn_running") {
      // Refused prompts are not archived: give the text back.
      this.restorePendingPrompt();
      this.setRunning(true);
      this.appendRow(noticeMessage(ERROR_TITLES.turn_running, { level: "info", detail: "Wait for it to finish, or press Stop." }));
      return;
    }
    const isModelFailure = errorCode === "model_failed";
    if (!isModelFailure) this.restorePendingPrompt();
    this.finishStream();
    this.setRunning(false);
    if (this.pendingConfirmations.size) {
      this.pendingConfirmations.clear();
      this.renderCanvasNow();
    }
    const title = ERROR_TITLES[errorCode] ?? (isModelFailure ? ERROR_TITLES.model_failed : "Something went wrong");
    const extra = isModelFailure ? "Your message was saved; send another to try again." : "";
    const row = noticeMessage(title, { level: "error", detail: [detailText, extra].filter(Boolean).join(" ") });
    row.dataset.code = errorCode;
    this.appendRow(row);
  }

  // --- conversation ----------------------------------------------------------------------

  sendPrompt() {
    const text = this.dom.message.value.trim();
    if (!text) return;
    if (this.running) {
      this.flashHint("A reply is still being written — wait for it, or press Stop.");
      return;
    }
    const frame = { type: "prompt", text };
    const overHttp = new TextEncoder().encode(JSON.stringify(frame)).length > MAX_FRAME_BYTES;
    if (overHttp) {
      this.sendPromptOverHttp(text);
    } else if (!this.socket.send(frame)) {
      this.flashHint("Not connected yet — your message is still here; send it again in a moment.");
      return;
    }
    this.finishStream();
    this.pendingRow = userMessage(text, { pending: true });
    this.appendRow(this.pendingRow);
    this.dom.message.value = "";
    this.autosize();
    this.setRunning(true);
    this.ensureStreamRow();
    this.scrollToBottom(true);
  }

  /**
   * A prompt too big for one WebSocket frame goes to POST /prompt: its answer is what the API
   * answers anyone (413 with the token limit, 409, 422…); the turn itself still shows through the
   * socket's frames like any other.
   */
  async sendPromptOverHttp(text) {
    let answer;
    try {
      answer = await this.sendJson("POST", this.config.urls.prompt, { text, agent: this.agent.id, chat_id: this.chatId });
    } catch {
      this.onError({ code: "network", detail: "The server could not be reached." });
      return;
    }
    const { status, data } = answer;
    if (status === 200) {
      // The socket has shown the turn as it ran; if it was away, the answer ends it here instead.
      if (this.pendingRow) delete this.pendingRow.dataset.pending;
      this.pendingRow = null;
      this.onAssistantMessage({ text: data?.reply ?? "", message_id: data?.message_id ?? null });
      return;
    }
    if (status === 401 || status === 502) return; // the login page, or the socket's model_failed frame
    // Every error body says its code (README: HTTP API), as an error frame would.
    this.onError({ code: asText(data?.code) || "error", detail: asText(data?.detail) || `The server answered ${status}.` });
  }

  restorePendingPrompt() {
    const row = this.pendingRow;
    if (!row) return;
    const text = row.querySelector(".msg-text")?.textContent ?? "";
    row.remove();
    this.pendingRow = null;
    if (this.streamRow && !this.streamText) {
      this.streamRow.remove();
      this.streamRow = null;
    }
    if (!this.dom.message.value) {
      this.dom.message.value = text;
      this.autosize();
    }
    this.updateEmpty();
  }

  cancelTurn() {
    if (!this.running) return;
    if (this.socket.send({ type: "cancel" })) {
      this.dom.stop.disabled = true;
      this.dom.stop.textContent = "Stopping…";
    }
  }

  finishStream() {
    const row = this.streamRow;
    if (!row) return;
    if (this.streamText) setAssistantText(row, this.streamText, { streaming: false });
    else if (row.querySelector(".msg-tools")) {
      setAssistantText(row, "", { streaming: false });
      row.classList.add("msg-tools-only");
    } else row.remove();
    this.streamRow = null;
    this.streamText = "";
    this.updateEmpty();
  }

  setRunning(running) {
    this.running = running;
    const { stop, send, composer } = this.dom;
    stop.hidden = !running;
    stop.disabled = false;
    stop.textContent = "Stop";
    send.disabled = running;
    composer.dataset.running = running ? "true" : "false";
  }

  flashHint(text) {
    const hint = this.dom.composerHint;
    hint.textContent = text;
    hint.classList.add("is-warning");
    clearTimeout(this.hintTimer);
    this.hintTimer = setTimeout(() => {
      hint.textContent = hint.dataset.default;
      hint.classList.remove("is-warning");
    }, 4000);
  }

  appendRow(row) {
    const stick = this.isNearBottom();
    this.dom.log.append(row);
    this.updateEmpty();
    if (stick) this.scrollToBottom(true);
  }

  isNearBottom() {
    const scroller = this.dom.logScroll;
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  scrollToBottom(force = false) {
    const scroller = this.dom.logScroll;
    if (force || this.isNearBottom()) scroller.scrollTop = scroller.scrollHeight;
  }

  updateEmpty() {
    const empty = this.dom.log.children.length === 0 && !this.dom.logScroll.hasAttribute("aria-busy");
    this.dom.emptyConversation.hidden = !empty;
    this.dom.emptyAgentName.textContent = this.agent.name || "Buddy";
  }

  refreshAgentBubbles() {
    for (const avatar of this.dom.log.querySelectorAll(".msg-assistant .msg-avatar:not(.msg-avatar-spacer)")) {
      avatar.textContent = this.agent.avatar || "🤖";
    }
    this.updateEmpty();
  }

  updateTitle() {
    document.title = `${this.agent.name || "Buddy"} · Buddy`;
    this.dom.message.placeholder = `Message ${this.agent.name || "Buddy"}…`;
    this.updateEmpty();
  }

  autosize() {
    const box = this.dom.message;
    box.style.height = "auto";
    box.style.height = `${Math.min(box.scrollHeight + 2, 220)}px`;
  }

  // --- canvas -----------------------------------------------------------------------------

  answerConfirmation(id, confirmed) {
    if (this.pendingConfirmations.has(id)) return;
    if (!this.socket.send({ type: "confirmation_response", id, confirmed })) {
      this.showToast("Not connected — try again in a moment.", "warning");
      return;
    }
    this.pendingConfirmations.add(id);
    this.focusAfterRender = id;
    this.renderCanvasNow();
  }

  renderCanvasNow() {
    const focusLost = this.focusAfterRender !== null && this.dom.canvas.contains(document.activeElement);
    renderCanvas(this.dom.canvas, this.canvas, {
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
    const count = this.canvas.elements.length;
    this.dom.canvasCount.textContent = count === 0 ? "" : `${count} ${count === 1 ? "element" : "elements"}`;
    applyTheme(this.canvas.theme);
  }

  showToast(message, level) {
    if (!message) return;
    const kind = TOAST_LEVELS.includes(level) ? level : "info";
    const toast = document.createElement("div");
    toast.className = `toast toast-${kind}`;
    toast.dataset.level = kind;
    const icon = document.createElement("span");
    icon.className = "toast-icon";
    icon.setAttribute("aria-hidden", "true");
    icon.textContent = { info: "ℹ", success: "✓", warning: "!", error: "⚠" }[kind];
    const body = document.createElement("p");
    body.className = "toast-text";
    body.textContent = message;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss notification");
    close.textContent = "×";
    toast.append(icon, body, close);
    const dismiss = () => {
      toast.classList.add("is-leaving");
      setTimeout(() => toast.remove(), 200);
    };
    close.addEventListener("click", dismiss);
    this.dom.toasts.append(toast);
    setTimeout(dismiss, kind === "error" ? 8000 : 5000);
  }
}

function readConfig() {
  const node = document.getElementById("buddy-config");
  return JSON.parse(node.textContent);
}

function collectDom() {
  const byId = (id) => document.getElementById(id);
  return {
    composer: byId("composer"),
    composerHint: byId("composer-hint"),
    message: byId("message"),
    send: byId("send"),
    stop: byId("stop"),
    agentSelect: byId("agent"),
    chatSelect: byId("chat"),
    newChat: byId("new-chat"),
    log: byId("conversation"),
    logScroll: byId("log-scroll"),
    loadEarlier: byId("load-earlier"),
    emptyConversation: byId("conversation-empty"),
    emptyAgentName: byId("conversation-empty-agent"),
    canvas: byId("canvas"),
    canvasCount: byId("canvas-count"),
    toasts: byId("toasts"),
    connection: byId("connection"),
    connectionText: byId("connection-text"),
    reconnectNow: byId("reconnect-now"),
    tryDemo: byId("try-demo"),
    chatPicker: byId("chat-picker"),
    renameChat: byId("rename-chat"),
    renameForm: byId("rename-form"),
    renameInput: byId("chat-title"),
    renameCancel: byId("rename-cancel"),
    canvasPanel: byId("canvas-panel"),
    canvasScroll: byId("canvas-scroll"),
    canvasPointer: byId("canvas-pointer"),
    canvasPointerText: byId("canvas-pointer-text"),
    memoryPanel: byId("memory-panel"),
    memoryChat: byId("memory-chat"),
    memoryProfile: byId("memory-profile"),
    memoryCount: byId("memory-count"),
    showMemory: byId("show-memory"),
    showCanvas: byId("show-canvas"),
    backToLatest: byId("back-to-latest"),
  };
}

if (document.getElementById("buddy-config")) {
  const app = new BuddyApp(readConfig(), collectDom());
  // A handle for the browser console (and the browser tests), not an API.
  window.buddy = app;
  app.start();
}
