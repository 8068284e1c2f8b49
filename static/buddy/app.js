// The page's shell: reads the config the server renders (web/views.py: API paths, limits, toast
// levels), builds each part of the page and wires them together (docs/architecture.md, "The page").
// The parts never import one another: each is handed what it needs (the API client, the Place being
// shown, its DOM nodes) and reports through the callbacks given here; this shell decides what an
// event means for the others. Frames and endpoints are the README's ("HTTP API").

import { AgentPicker } from "./agents.js";
import { Api } from "./api.js";
import { CanvasPane } from "./canvas-pane.js";
import { ChatList, newChatId } from "./chatlist.js";
import { Composer } from "./composer.js";
import { ConnectionStatus } from "./connection.js";
import { collectDom } from "./dom.js";
import { Drawer } from "./drawer.js";
import { noticeMessage } from "./conversation.js";
import { ERROR_TITLES, describeError, errorNotice } from "./errors.js";
import { frameRouter } from "./frames.js";
import { HistoryPager } from "./history.js";
import { ConversationLog } from "./log.js";
import { configureMarkdown } from "./markdown.js";
import { MemoryView } from "./memory.js";
import { Place } from "./place.js";
import { ChatSearch } from "./search.js";
import { ReconnectingSocket, socketUrl } from "./socket.js";
import { asText } from "./text.js";
import { ThemePicker } from "./theme.js";
import { Toaster } from "./toasts.js";
import { LiveTurn } from "./turn.js";

const CLOSE_LOGGED_OUT = 4401; // the server closes every socket of a user who logged out

class BuddyApp {
  constructor(config, dom) {
    const { urls, limits } = config;
    this.config = config;
    this.awaitingSwitch = false; // a switch_agent frame sent, its answer not yet here
    this.agentBeforeSwitch = null;
    this.failedConnects = 0;

    this.place = new Place({
      username: config.user?.username,
      agent: { id: config.defaultAgent, name: config.defaultAgentName || "Buddy", avatar: config.defaultAgentAvatar || "🤖" },
      chatId: config.defaultChatId,
      chatIdPattern: limits.chatIdPattern,
    });
    const place = this.place;
    const api = new Api({ onUnauthorized: () => this.goToLogin() });
    this.api = api;
    const toaster = new Toaster(dom.toasts, config.toastLevels);
    const notify = (text, level) => toaster.show(text, level);
    // Reading (issue 31): images in Markdown only from the hosts the page's policy allows; the theme.
    configureMarkdown({ mediaHosts: config.mediaHosts ?? [] });
    this.theme = new ThemePicker({
      api,
      url: urls.preferences,
      theme: config.preferences?.theme ?? "system",
      notify,
      select: dom.themeSelect,
    });

    this.connection = new ConnectionStatus(dom.connection, { onRetry: () => this.socket.reconnect() });
    this.socket = new ReconnectingSocket(() => socketUrl(window.location, urls.socket, { agent: place.agent.id, chatId: place.chatId }), {
      onFrame: (frame) => this.onFrame(frame),
      onOpen: (info) => this.onOpen(info),
      onClose: (info) => this.onClose(info),
      onStatus: (status, detail) => this.connection.show(status, detail),
    });
    this.composer = new Composer({
      onSend: (text) => this.sendPrompt(text),
      onStop: () => this.socket.send({ type: "cancel" }),
      dom: dom.composer,
    });
    this.log = new ConversationLog(dom.log, place);
    this.turn = new LiveTurn({
      log: this.log,
      place,
      onRunning: (running) => this.composer.setRunning(running),
      onReply: () => this.chats.load(),
    });
    this.notify = notify;
    this.chats = new ChatList({
      api,
      urls: { chats: urls.chats, chatExport: urls.chatExport },
      place,
      agentOf: (agentId) => this.agents?.find(agentId) ?? null,
      titleChars: limits.titleChars,
      onOpen: (chatId, options) => this.openChat(chatId, options),
      onDeleted: (chat, next) => this.onChatDeletedHere(chat, next),
      notify,
      dom: dom.chats,
    });
    this.drawer = new Drawer(dom.drawer);
    this.history = new HistoryPager({
      api,
      url: urls.history,
      log: this.log,
      place,
      chats: this.chats,
      onClear: () => this.turn.reset(),
      dom: dom.history,
    });
    this.agents = new AgentPicker({
      api,
      url: urls.agents,
      select: dom.agentSelect,
      place,
      defaultAgent: config.defaultAgent,
      onChoose: (agentId) => this.switchAgent(agentId),
      onDetails: (agent) => this.showAgentDetails(agent),
    });
    this.canvas = new CanvasPane({
      send: (frame) => this.socket.send(frame),
      notify,
      dom: dom.canvas,
    });
    this.memory = new MemoryView({
      api,
      urls: { notes: urls.notes, noteVersions: urls.noteVersions, noteRestore: urls.noteRestore },
      place,
      noteBytes: limits.noteBytes,
      notify,
      dom: dom.memory,
    });
    // The chat list's header holds the slot when there is one; the page header's otherwise.
    if (dom.searchSlot) {
      this.search = new ChatSearch({
        api,
        url: urls.search,
        slot: dom.searchSlot,
        agentName: (slug) => [...dom.agentSelect.options].find((option) => option.value === slug)?.textContent.trim() || slug,
        notify,
      });
    }
    this.routeFrame = frameRouter(this.frameHandlers());
  }

  start() {
    this.canvas.render();
    this.chats.render();
    this.updateTitle();
    this.composer.setRunning(false);
    this.socket.start();
    this.place.save(); // the address names the agent and chat shown, so a reload keeps them
    this.chats.reload();
    this.history.load();
    this.agents.load().then(() => this.chats.render());
  }

  goToLogin() {
    window.location.assign(`${this.config.loginUrl}?next=${encodeURIComponent(window.location.pathname)}`);
  }

  updateTitle() {
    const name = this.place.agent.name || "Buddy";
    document.title = `${name} · Buddy`;
    this.composer.setAgentName(name);
    this.log.updateEmpty();
  }

  showAgentDetails(agent) {
    this.place.agent = agent;
    this.updateTitle();
    this.log.refreshAgentBubbles();
  }

  // --- switching agent and chat -----------------------------------------------------------

  prepareForOtherConversation() {
    this.canvas.reset();
    this.composer.setRunning(false);
  }

  switchAgent(agentId) {
    const agent = this.agents.find(agentId);
    if (!agent || agent.id === this.place.agent.id) {
      this.agents.show(this.place.agent.id);
      return;
    }
    this.agentBeforeSwitch = this.place.agent;
    this.place.agent = { ...agent };
    this.agents.show(agent.id);
    this.place.aroundId = null;
    this.place.save();
    this.updateTitle();
    this.prepareForOtherConversation();
    if (this.socket.send({ type: "switch_agent", agent: agent.id })) {
      // Until the server confirms, frames still belong to the old agent's conversation.
      this.awaitingSwitch = true;
    } else {
      this.socket.reconnect();
    }
    this.chats.render();
    this.place.aroundId = null;
    this.history.load();
    this.memory.refresh();
  }

  /** Shows another chat (of another agent when `agent` names one): from the chat list, or a new one. */
  openChat(chatId, { isNew = false, agent = null } = {}) {
    this.drawer.close({ returnFocus: false });
    const otherAgent = agent !== null && agent !== this.place.agent.id;
    if (!this.place.isChatId(chatId) || (chatId === this.place.chatId && !isNew && !otherAgent)) return;
    if (otherAgent) {
      this.place.agent = { ...(this.agents.find(agent) ?? { id: agent, name: agent, avatar: "" }) };
      this.agents.show(agent);
      this.updateTitle();
    }
    this.place.chatId = chatId;
    this.place.aroundId = null;
    this.memory.refresh();
    this.place.save();
    this.prepareForOtherConversation();
    this.awaitingSwitch = false;
    this.socket.reconnect();
    this.chats.render();
    this.history.load();
    if (isNew || document.activeElement === document.body) this.composer.focus();
  }

  /** This page deleted `chat`: when it was the one shown, show `next` (or a new chat). */
  onChatDeletedHere(chat, next) {
    this.notify(`Deleted “${this.chats.chatName(chat)}”.`, "success");
    if (!this.chats.isShown(chat)) return;
    if (next) this.openChat(next.chat_id, { agent: next.agent });
    else this.openChat(newChatId(), { isNew: true });
  }

  /** The server says the chat shown was deleted (in another tab, or from the API). */
  async onChatDeleted(frame) {
    if (frame.agent !== this.place.agent.id || frame.chat_id !== this.place.chatId || this.chats.deleting) return;
    this.notify("This chat was deleted in another tab or app.", "info");
    await this.chats.reload();
    const next = this.chats.nextAfter({ agent: frame.agent, chat_id: frame.chat_id });
    if (next) this.openChat(next.chat_id, { agent: next.agent });
    else this.openChat(newChatId(), { isNew: true });
  }

  // --- the socket -------------------------------------------------------------------------

  onOpen({ reconnected }) {
    this.failedConnects = 0;
    this.canvas.onConnected();
    this.awaitingSwitch = false;
    if (reconnected) {
      // Messages may have been written while we were away: read the chat list, then the archive, again.
      this.chats.reload();
      this.history.load();
    }
  }

  onClose({ code }) {
    if (code === CLOSE_LOGGED_OUT) {
      this.socket.stop();
      this.goToLogin();
      return;
    }
    this.failedConnects += 1;
    this.turn.finishStream();
    this.composer.setRunning(false);
    if (this.failedConnects === 2 || this.failedConnects % 5 === 0) this.checkSignedIn();
  }

  async checkSignedIn() {
    // A refused handshake looks like any network error to the browser; if we were logged out
    // (maybe in another tab), the API's 401 leads to the login page, which beats retrying forever.
    try {
      await this.api.get(this.config.urls.agents);
    } catch {
      // The server is down: keep retrying.
    }
  }

  /** What the page does with each frame the server sends (tests/web/test_frames.py holds it to the server's list). */
  frameHandlers() {
    return {
      canvas_command: (frame) => this.canvas.onCommand(frame),
      user_message: (frame) => this.turn.onUserMessage(frame),
      tool_use: (frame) => this.turn.onToolUse(frame),
      tool_result: (frame) => this.turn.onToolResult(frame),
      assistant_delta: (frame) => this.turn.onAssistantDelta(frame),
      assistant_message: (frame) => this.onAssistantMessage(frame),
      agent_switch: (frame) => this.onAgentSwitch(frame),
      chats_changed: (frame) => this.chats.changed(frame),
      chat_deleted: (frame) => this.onChatDeleted(frame),
      error: (frame) => this.onError(frame),
    };
  }

  onFrame(frame) {
    if (this.awaitingSwitch && frame.type !== "agent_switch" && frame.type !== "error") return;
    this.routeFrame(frame);
  }

  onAssistantMessage(frame) {
    this.memory.refresh(); // the turn may have changed a note
    this.turn.onAssistantMessage(frame);
  }

  onAgentSwitch({ agent }) {
    this.awaitingSwitch = false;
    if (agent && typeof agent.id === "string") {
      const changed = agent.id !== this.place.agent.id;
      this.place.agent = { id: agent.id, name: asText(agent.name) || agent.id, avatar: asText(agent.avatar) };
      this.agents.remember(this.place.agent);
      this.agents.show(agent.id);
      this.place.save();
      this.updateTitle();
      if (changed) {
        this.chats.render();
        this.history.load();
      }
    }
    this.canvas.forgetVersion();
  }

  onError({ code, detail }) {
    const errorCode = asText(code) || "error";
    const detailText = asText(detail);
    if (this.awaitingSwitch) {
      this.awaitingSwitch = false;
      if ((errorCode === "not_found" || errorCode === "invalid_agent") && this.agentBeforeSwitch) {
        // The server kept the socket on the previous agent: show that conversation again.
        this.place.agent = this.agentBeforeSwitch;
        this.agents.show(this.place.agent.id);
        this.place.save();
        this.updateTitle();
        this.chats.render();
        this.history.load();
        this.canvas.rebuildOnNextClear();
        this.socket.send({ type: "replay" });
      }
    }
    if (errorCode === "turn_running") {
      // Refused prompts are not archived: give the text back.
      this.restorePendingPrompt();
      this.composer.setRunning(true);
      this.log.append(noticeMessage(ERROR_TITLES.turn_running, { level: "info", detail: "Wait for it to finish, or press Stop." }));
      return;
    }
    const isModelFailure = errorCode === "model_failed";
    if (!isModelFailure) this.restorePendingPrompt();
    this.turn.finishStream();
    this.composer.setRunning(false);
    this.canvas.dropPendingConfirmations();
    const extra = isModelFailure ? "Your message was saved; send another to try again." : "";
    this.log.append(errorNotice({ code: errorCode, detail: detailText }, { extra }));
  }

  // --- sending a prompt -------------------------------------------------------------------

  async sendPrompt(text) {
    if (this.place.aroundId !== null) {
      // Opened at an older message: first the newest messages, so the turn follows them with no gap.
      this.composer.clear();
      await this.history.leaveAround();
      this.composer.restore(text);
    }
    const frame = { type: "prompt", text };
    const overHttp = new TextEncoder().encode(JSON.stringify(frame)).length > this.config.limits.frameBytes;
    if (overHttp) {
      this.sendPromptOverHttp(text);
    } else if (!this.socket.send(frame)) {
      this.composer.flashHint("Not connected yet — your message is still here; send it again in a moment.");
      return;
    }
    this.turn.addPending(text);
    this.composer.clear();
  }

  /**
   * A prompt too big for one WebSocket frame goes to the API's prompt endpoint: its answer is what
   * the API answers anyone (its code and detail); the turn itself still shows through the socket's
   * frames like any other.
   */
  async sendPromptOverHttp(text) {
    let answer;
    try {
      answer = await this.api.send("POST", this.config.urls.prompt, { text, ...this.place.chat() });
    } catch {
      this.onError({ code: "network", detail: "The server could not be reached." });
      return;
    }
    const { status, data, error } = answer;
    if (!error) {
      // The socket has shown the turn as it ran; if it was away, the answer ends it here instead.
      this.turn.settlePending();
      this.memory.refresh(); // the turn may have changed a note
      this.turn.onAnswer({ text: data?.reply ?? "", message_id: data?.message_id ?? null });
      return;
    }
    // On the way to the login page; or a failed model call, which the socket's error frame reports.
    if (status === 401 || error.code === "model_failed") return;
    this.onError({ code: error.code, detail: describeError(error) });
  }

  restorePendingPrompt() {
    const text = this.turn.withdrawPending();
    if (text !== null) this.composer.restore(text);
  }
}

const configNode = document.getElementById("buddy-config");
if (configNode) {
  const app = new BuddyApp(JSON.parse(configNode.textContent), collectDom());
  // A handle for the browser console, not an API.
  window.buddy = app;
  app.start();
}
