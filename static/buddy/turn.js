// The turn being written, live from the socket's frames: the prompt sent from this tab until the
// server starts it, the reply as it streams, a chip per tool call, a row of failed tool calls, and
// the final reply with its sources. Once finished, the rows look as an archived turn looks after a
// reload (conversation.js draws both).

import {
  addFailureChip,
  addSources,
  addToolChip,
  assistantMessage,
  setAssistantText,
  stamp,
  toolFailureRow,
  userMessage,
} from "./conversation.js";
import { asText } from "./text.js";

function idOf(messageId) {
  return messageId === undefined || messageId === null ? null : String(messageId);
}

export class LiveTurn {
  /**
   * `log`: the ConversationLog the rows go into; `place` gives the agent who replies;
   * `onRunning(running)` when a turn starts or ends; `onReply()` after a new reply was shown.
   */
  constructor({ log, place, onRunning, onReply }) {
    this.log = log;
    this.place = place;
    this.onRunning = onRunning;
    this.onReply = onReply;
    this.reset();
  }

  /** Forget the turn's rows (the log is about to show another chat, or the same one anew). */
  reset() {
    this.pendingRow = null; // our prompt, sent but not started by the server yet
    this.streamRow = null;
    this.streamText = "";
    this.turnTexts = []; // text already shown in earlier rows of the running turn (rounds of tool calls)
    this.failureRow = null;
    this.answeredAhead = null; // the reply an HTTP answer showed before the socket's frames of its turn
  }

  /** A prompt sent from this tab: shown at once, marked pending until the server starts it. */
  addPending(text) {
    this.answeredAhead = null;
    this.finishStream();
    this.pendingRow = userMessage(text, { pending: true });
    this.log.append(this.pendingRow);
    this.onRunning(true);
    this.ensureStreamRow();
    this.log.scrollToBottom(true);
  }

  /** A prompt the server refused is not archived: takes its row away and answers its text (or null). */
  withdrawPending() {
    const row = this.pendingRow;
    if (!row) return null;
    const text = row.querySelector(".msg-text")?.textContent ?? "";
    row.remove();
    this.pendingRow = null;
    if (this.streamRow && !this.streamText) {
      this.streamRow.remove();
      this.streamRow = null;
    }
    this.log.updateEmpty();
    return text;
  }

  /** A prompt sent over HTTP ended by its answer: the prompt is no longer pending. */
  settlePending() {
    if (this.pendingRow) delete this.pendingRow.dataset.pending;
    this.pendingRow = null;
  }

  onUserMessage({ text, message_id: messageId, kind }) {
    const id = idOf(messageId);
    if (id !== null && this.log.hasShown(id)) return;
    if (id !== null) this.log.markShown(id);
    this.answeredAhead = null; // a new turn: its deltas are its own
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
      this.log.append(userMessage(asText(text), { messageId: id, createdAt: now, kind: asText(kind) || "typed" }));
    }
    this.onRunning(true);
    this.ensureStreamRow();
  }

  onToolUse({ id, name }) {
    // A tool call belongs to the assistant message being written: its chip goes on that row.
    this.failureRow = null;
    if (typeof id === "string") this.log.markToolShown(id);
    const row = this.ensureStreamRow();
    addToolChip(row, asText(name));
    this.onRunning(true);
    this.log.scrollToBottom();
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
        if (waiting) this.log.insertBefore(this.failureRow, waiting);
        else this.log.append(this.failureRow);
      }
      addFailureChip(this.failureRow, asText(summary));
    }
    this.ensureStreamRow();
    this.log.scrollToBottom();
  }

  onAssistantDelta({ text }) {
    // The reply is shown already (its HTTP answer came first): its deltas would draw it a second time.
    if (this.answeredAhead !== null) return;
    this.failureRow = null;
    const row = this.ensureStreamRow();
    this.streamText += asText(text);
    setAssistantText(row, this.streamText, { streaming: true });
    this.onRunning(true);
    this.log.scrollToBottom();
  }

  /** The HTTP answer to a prompt this tab sent: ends its turn here, unless the socket's frames did. */
  onAnswer(frame) {
    const id = idOf(frame.message_id);
    const ahead = id !== null && !this.log.hasShown(id);
    this.onAssistantMessage(frame);
    if (ahead) this.answeredAhead = id; // until the socket's own `assistant_message` for it
  }

  onAssistantMessage({ text, message_id: messageId, sources }) {
    const id = idOf(messageId);
    if (id !== null && this.log.hasShown(id)) {
      // Shown already (a prompt sent over HTTP is ended by its answer, which can arrive before the
      // socket's frames): deltas that came after it are the same text again.
      if (id === this.answeredAhead) this.answeredAhead = null;
      if (this.streamRow && !this.streamRow.dataset.messageId) this.streamRow.remove();
      this.streamRow = null;
      this.streamText = "";
      this.turnTexts = [];
      this.onRunning(false);
      return;
    }
    // The frame's text is the whole turn's; rows of earlier rounds already show their part of it.
    let finalText = asText(text) || this.streamText;
    const earlier = this.turnTexts.join("\n\n");
    if (earlier) finalText = this.streamText || (finalText.startsWith(earlier) ? finalText.slice(earlier.length).trim() : "");
    const row = this.streamRow ?? assistantMessage(this.place.agent, "", { streaming: true });
    if (!row.isConnected) this.log.append(row);
    setAssistantText(row, finalText, { streaming: false });
    stamp(row, new Date().toISOString());
    if (id !== null) {
      row.dataset.messageId = id;
      this.log.markShown(id);
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
    this.onRunning(false);
    this.log.updateEmpty();
    this.log.scrollToBottom();
    this.onReply();
  }

  /** Ends the row being written where it stands (the turn failed, stopped or the socket closed). */
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
    this.log.updateEmpty();
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
    this.streamRow = assistantMessage(this.place.agent, "", { streaming: true });
    this.log.append(this.streamRow);
    return this.streamRow;
  }
}
