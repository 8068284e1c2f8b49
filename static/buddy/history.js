// The chat's archive in the log: its newest page (or the page around a linked message), older pages
// as the reader scrolls up or asks for them, and the way back from a linked message to the newest.

import { noticeMessage } from "./conversation.js";

const PAGE_SIZE = 50;

/** A message row the keyboard can be put on (not in the Tab order). */
function focusRow(row, { preventScroll = false } = {}) {
  if (!row) return;
  row.tabIndex = -1;
  row.focus({ preventScroll });
}

function previousRow(row) {
  let node = row?.previousElementSibling ?? null;
  while (node && !node.classList.contains("msg")) node = node.previousElementSibling;
  return node;
}

/**
 * The message a link opened the page at: marked with a visible label, scrolled to the middle and
 * given the keyboard's focus, so reading starts there.
 */
function markLinked(row, messageId) {
  row.classList.add("is-linked");
  row.id = `message-${messageId}`;
  const marker = document.createElement("p");
  marker.className = "linked-marker";
  marker.textContent = "Opened at this message";
  row.querySelector(".msg-main")?.prepend(marker);
  row.scrollIntoView({ block: "center" });
  focusRow(row, { preventScroll: true });
}

export class HistoryPager {
  /**
   * `url`: the API's history path; `log`: the ConversationLog; `place`: the chat shown;
   * `chats`: answers `ready` (a promise of the chat list) and `mayHaveHistory()`;
   * `onClear()`: the log is about to show the chat anew (the live turn forgets its rows).
   * dom: `logScroll`, `loadEarlier`, `backToLatest`.
   */
  constructor({ api, url, log, place, chats, onClear, dom }) {
    this.api = api;
    this.url = url;
    this.log = log;
    this.place = place;
    this.chats = chats;
    this.onClear = onClear;
    this.dom = dom;
    this.nextBefore = null;
    this.loadingEarlier = false;
    this.generation = 0;
    dom.logScroll.addEventListener("scroll", () => {
      if (dom.logScroll.scrollTop < 80) this.loadEarlier();
    });
    dom.loadEarlier.addEventListener("click", () => this.loadEarlier());
    dom.backToLatest.addEventListener("click", () => this.leaveAround());
  }

  async fetchPage(before, around = null) {
    const params = { ...this.place.chat(), limit: String(PAGE_SIZE) };
    if (before !== null && before !== undefined) params.before = String(before);
    if (around !== null) params.around = String(around);
    const { status, data } = await this.api.get(this.url, params);
    // A chat that does not exist yet is a 404: it simply has no history.
    if (status === 404) return { messages: [], next_before: null };
    if (status !== 200 || !data || !Array.isArray(data.messages)) throw new Error(`history answered ${status}`);
    return data;
  }

  /** Shows the newest page of this chat's archive; called on start, on every reconnect and switch. */
  async load() {
    const generation = ++this.generation;
    this.log.clear();
    this.onClear();
    this.setNextBefore(null);
    this.log.setBusy(true);
    // The chat list first: a chat that does not exist yet has no history to ask for (only a 404).
    await this.chats.ready;
    if (generation !== this.generation) return;
    if (!this.chats.mayHaveHistory()) {
      this.log.setBusy(false);
      return;
    }
    let page;
    const around = this.place.aroundId;
    try {
      page = await this.fetchPage(null, around);
    } catch {
      if (generation !== this.generation) return;
      this.log.setBusy(false);
      this.log.append(noticeMessage("Couldn't load this conversation's history.", { level: "error", detail: "It will load again when the connection comes back." }));
      return;
    }
    if (generation !== this.generation) return;
    this.log.setBusy(false);
    this.log.prependMessages(page.messages);
    this.setNextBefore(page.next_before);
    this.dom.backToLatest.hidden = around === null;
    const target = around === null ? null : this.log.rowOf(around);
    if (target) {
      markLinked(target, around);
    } else {
      this.log.scrollToBottom(true);
    }
  }

  /** From a page around a linked message back to the newest messages. */
  leaveAround() {
    this.place.leaveAround();
    return this.load();
  }

  setNextBefore(value) {
    this.nextBefore = value === null || value === undefined ? null : value;
    this.dom.loadEarlier.hidden = this.nextBefore === null;
  }

  firstRow() {
    return this.dom.logScroll.querySelector("#conversation > .msg");
  }

  async loadEarlier() {
    if (this.nextBefore === null || this.loadingEarlier) return;
    const generation = this.generation;
    this.loadingEarlier = true;
    const button = this.dom.loadEarlier;
    button.textContent = "Loading earlier messages…";
    // aria-disabled, not disabled: a disabled button drops the keyboard's focus to the page's body.
    button.setAttribute("aria-disabled", "true");
    try {
      const page = await this.fetchPage(this.nextBefore);
      if (generation !== this.generation) return;
      const scroller = this.dom.logScroll;
      const oldTop = this.firstRow();
      // Keep what the reader is looking at in place while older messages appear above it.
      const fromBottom = scroller.scrollHeight - scroller.scrollTop;
      this.log.prependMessages(page.messages);
      scroller.scrollTop = scroller.scrollHeight - fromBottom;
      const hadFocus = document.activeElement === button; // hiding the button below drops it
      this.setNextBefore(page.next_before);
      if (hadFocus && button.hidden) {
        // Nothing older: the keyboard goes on at the newest message the button brought.
        focusRow(previousRow(oldTop) ?? this.firstRow());
      }
    } catch {
      // The button stays, so the reader can try again.
    } finally {
      this.loadingEarlier = false;
      button.textContent = "Load earlier messages";
      button.removeAttribute("aria-disabled");
    }
  }
}
