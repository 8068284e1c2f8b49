// The conversation log: its rows, which messages it already shows (a page of history and a live
// frame never show one message twice), its empty state, a heading for each day ("Today",
// "Yesterday", a date) above that day's first message, and the scrolling that keeps the newest
// message in view while the reader is near it.

import { historyMessage, setAuthor } from "./conversation.js";

const relativeDays = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const dayFormat = new Intl.DateTimeFormat(undefined, { weekday: "long", month: "long", day: "numeric" });
const dayYearFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "full" });

function dayKey(date) {
  return `${date.getFullYear()}-${date.getMonth() + 1}-${date.getDate()}`;
}

/** "Today", "Yesterday" (in the reader's language), or the date: the year only when it is not this one. */
export function dayLabel(date, now = new Date()) {
  const midnight = (value) => new Date(value.getFullYear(), value.getMonth(), value.getDate()).getTime();
  const daysAgo = Math.round((midnight(now) - midnight(date)) / 86_400_000);
  if (daysAgo === 0 || daysAgo === 1) {
    const words = relativeDays.format(-daysAgo, "day");
    return words.charAt(0).toLocaleUpperCase() + words.slice(1);
  }
  return (date.getFullYear() === now.getFullYear() ? dayFormat : dayYearFormat).format(date);
}

/** The day a row's message was written on (its local date), or null for a row not archived yet. */
function dayOf(row) {
  if (!row.dataset.createdAt) return null;
  const date = new Date(row.dataset.createdAt);
  return Number.isNaN(date.getTime()) ? null : date;
}

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
    this.updateDays();
  }

  /**
   * One day heading above the first message of each day. Headings that are still right stay as they
   * are (the log is a live region: a heading written again would be announced again).
   */
  updateDays() {
    const log = this.dom.log;
    const now = new Date();
    let lastDay = null;
    let waiting = null; // a heading met above the next dated row
    for (const node of [...log.children]) {
      if (node.classList.contains("day-separator")) {
        waiting?.remove();
        waiting = node;
        continue;
      }
      const date = dayOf(node);
      if (date === null) continue;
      const key = dayKey(date);
      if (key !== lastDay) {
        const label = dayLabel(date, now);
        if (waiting && waiting.dataset.day === key) {
          if (waiting.textContent !== label) waiting.textContent = label;
        } else {
          waiting?.remove();
          const heading = document.createElement("h3");
          heading.className = "day-separator";
          heading.dataset.day = key;
          heading.textContent = label;
          log.insertBefore(heading, node);
        }
        lastDay = key;
      } else {
        waiting?.remove();
      }
      waiting = null;
    }
    waiting?.remove();
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
    this.updateDays();
    const empty = this.dom.log.children.length === 0 && !this.dom.logScroll.hasAttribute("aria-busy");
    this.dom.emptyConversation.hidden = !empty;
    this.dom.emptyAgentName.textContent = this.place.agent.name || "Buddy";
  }

  /** The agent's avatar changed (its details arrived): every reply shows the new one. */
  refreshAgentBubbles() {
    for (const avatar of this.dom.log.querySelectorAll(".msg-assistant .msg-avatar:not(.msg-avatar-spacer)")) {
      avatar.textContent = this.place.agent.avatar || "🤖";
      setAuthor(avatar.closest(".msg"), this.place.agent.name || "Assistant");
    }
    this.updateEmpty();
  }
}
