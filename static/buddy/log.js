// The conversation log: its rows, which messages it already shows (a page of history and a live
// frame never show one message twice), its empty state, and the scrolling that keeps the newest
// message in view while the reader is near it.

import { historyMessage } from "./conversation.js";

export class ConversationLog {
  /** dom: `log`, `logScroll`, `emptyConversation`, `emptyAgentName`; `place` says whose rows these are. */
  constructor(dom, place) {
    this.dom = dom;
    this.place = place;
    this.shownIds = new Set(); // message ids, as strings
    this.shownToolUseIds = new Set(); // tool calls shown live (their frames carry no message id)
  }

  hasShown(messageId) {
    return this.shownIds.has(String(messageId));
  }

  markShown(messageId) {
    this.shownIds.add(String(messageId));
  }

  /** A tool call shown live: the archived message holding it (or its result) is not shown again. */
  markToolShown(toolUseId) {
    this.shownToolUseIds.add(toolUseId);
  }

  clear() {
    this.dom.log.replaceChildren();
    this.shownIds.clear();
    this.shownToolUseIds.clear();
  }

  /** While a page of history is on its way the log is busy, not empty. */
  setBusy(busy) {
    if (busy) this.dom.logScroll.setAttribute("aria-busy", "true");
    else this.dom.logScroll.removeAttribute("aria-busy");
    this.updateEmpty();
  }

  append(row) {
    const stick = this.isNearBottom();
    this.dom.log.append(row);
    this.updateEmpty();
    if (stick) this.scrollToBottom(true);
  }

  insertBefore(row, before) {
    this.dom.log.insertBefore(row, before);
  }

  /** Archived messages above what the log shows, skipping any it shows already. */
  prependMessages(messages) {
    const fragment = document.createDocumentFragment();
    for (const message of messages) {
      if (message.id !== undefined && this.shownIds.has(String(message.id))) continue;
      if (this.shownLive(message)) continue;
      const row = historyMessage(message, this.place.agent);
      if (message.id !== undefined) this.shownIds.add(String(message.id));
      if (row) fragment.append(row);
    }
    this.dom.log.prepend(fragment);
    this.updateEmpty();
  }

  /** Whether an archived message was shown live already: tool calls, or their results. */
  shownLive(message) {
    const blocks = Array.isArray(message.content) ? message.content : [];
    const ids = blocks
      .filter((block) => block && (block.type === "tool_use" || block.type === "tool_result"))
      .map((block) => (block.type === "tool_use" ? block.id : block.tool_use_id));
    const hasText = blocks.some((block) => block && block.type === "text" && block.text);
    return ids.length > 0 && !hasText && ids.every((id) => this.shownToolUseIds.has(id));
  }

  rowOf(messageId) {
    return this.dom.log.querySelector(`[data-message-id="${messageId}"]`);
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
    this.dom.emptyAgentName.textContent = this.place.agent.name || "Buddy";
  }

  /** The agent's avatar changed (its details arrived): every reply shows the new one. */
  refreshAgentBubbles() {
    for (const avatar of this.dom.log.querySelectorAll(".msg-assistant .msg-avatar:not(.msg-avatar-spacer)")) {
      avatar.textContent = this.place.agent.avatar || "🤖";
    }
    this.updateEmpty();
  }
}
