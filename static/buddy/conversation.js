// The conversation log: chat bubbles built from archived messages (raw Anthropic content blocks)
// and from live frames. User text is shown as typed; assistant text as sanitised Markdown
// (markdown.js); tool calls as small chips. Nothing from a message is ever parsed as HTML.
// Each message is an <article> headed (for a screen reader) by who wrote it and when; under its
// bubble, its time and a Copy button.

import { copyButton } from "./copy.js";
import { renderMarkdown } from "./markdown.js";
import { addSourceList } from "./sources.js";

function el(name, className, text) {
  const node = document.createElement(name);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function blocksOf(content) {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.filter((block) => block && typeof block === "object") : [];
}

function textOf(blocks) {
  return blocks
    .filter((block) => block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join("\n\n");
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const clockFormat = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });
let headingCounter = 0;

/** The text a message row's Copy button copies: what was typed, or the reply's Markdown source. */
const copyTexts = new WeakMap();

/**
 * A message row: an <article> named by a visually hidden heading ("You, 2:24 PM") that a screen
 * reader can jump to, and `main`, which holds the bubble and, below it, the time and a Copy button.
 */
function messageRow(className, who, { copy = null } = {}) {
  const row = el("article", className);
  headingCounter += 1;
  const heading = el("h4", "visually-hidden msg-heading");
  heading.id = `msg-heading-${headingCounter}`;
  row.setAttribute("aria-labelledby", heading.id);
  row.dataset.who = who;
  const main = el("div", "msg-main");
  const meta = el("div", "msg-meta");
  const time = el("time", "msg-time");
  meta.append(time);
  // Named for what it copies ("Copy reply", "Copy prompt"), never just "message": the message box is "Message".
  if (copy) meta.append(copyButton(copy, () => copyTexts.get(row) ?? "", "copy-button msg-copy"));
  row.append(heading, main);
  main.append(meta);
  relabel(row);
  return { row, main, meta };
}

/** Re-writes a row's heading from who wrote it and when (after either changed). */
function relabel(row) {
  const heading = row.querySelector(":scope > .msg-heading");
  if (!heading) return;
  const time = row.querySelector(".msg-time")?.textContent;
  heading.textContent = time ? `${row.dataset.who}, ${time}` : row.dataset.who;
}

/** The name a reply is headed by: the agent's, after its details arrived. */
export function setAuthor(row, who) {
  row.dataset.who = who;
  relabel(row);
}

/** When a message row was archived (now, for a message that just arrived): its time shown under the
 * bubble, the full date as its tooltip, and the day the log's separators group it by. */
export function stamp(node, createdAt) {
  if (!createdAt) return;
  const date = new Date(createdAt);
  if (Number.isNaN(date.getTime())) return;
  node.title = timeFormat.format(date);
  node.dataset.createdAt = date.toISOString();
  const time = node.querySelector(".msg-time");
  if (time) {
    time.dateTime = date.toISOString();
    time.textContent = clockFormat.format(date);
  }
  relabel(node);
}

// `[confirmation ID: confirmed|declined]`, and on a second line what the answer did, when the server says.
const CONFIRMATION_ANSWER = /^\[confirmation ([^\]]+): (confirmed|declined)\](?:\n(.+))?$/;

function toolLabel(name) {
  return String(name ?? "tool");
}

function chip(text, className = "") {
  const node = el("li", `chip ${className}`.trim());
  node.append(el("span", "chip-icon", "🛠"), document.createTextNode(` ${text}`));
  node.firstChild.setAttribute("aria-hidden", "true");
  return node;
}

/** Adds a tool call's chip to an assistant row, as a reloaded turn shows it. */
export function addToolChip(row, name) {
  const main = row.querySelector(".msg-main");
  let list = main.querySelector(".msg-tools");
  if (!list) {
    list = el("ul", "msg-tools");
    list.setAttribute("aria-label", "Tools used");
    main.insertBefore(list, main.querySelector(":scope > .msg-meta"));
  }
  list.append(chip(toolLabel(name)));
}

/** A row of failed tool calls (the results of one round), as a reloaded turn shows it. */
export function toolFailureRow(messageId = null) {
  const { row, main } = messageRow("msg msg-assistant msg-tools-only msg-tool-failures", "Tool results");
  if (messageId !== null) row.dataset.messageId = String(messageId);
  const spacer = el("div", "msg-avatar msg-avatar-spacer");
  spacer.setAttribute("aria-hidden", "true");
  const list = el("ul", "msg-tools");
  list.setAttribute("aria-label", "Tool results");
  main.prepend(list);
  row.insertBefore(spacer, main);
  return row;
}

export function addFailureChip(row, summary = "") {
  const node = chip("tool call failed", "chip-error");
  if (summary) node.title = summary;
  row.querySelector(".msg-tools").append(node);
}

const KIND_LABELS = { confirmation: "Confirmation answer", scheduled: "Scheduled prompt" };

/**
 * A user's bubble. `pending` marks a prompt sent from this tab that the server has not started yet.
 * `kind` says what started the turn: `typed`, or `confirmation` / `scheduled`, which are labelled so.
 */
export function userMessage(text, { messageId = null, pending = false, createdAt = null, kind = "typed" } = {}) {
  const label = KIND_LABELS[kind];
  const { row, main } = messageRow("msg msg-user", label ?? "You", { copy: "prompt" });
  if (messageId !== null) row.dataset.messageId = String(messageId);
  if (pending) row.dataset.pending = "true";
  if (label) row.dataset.kind = kind;
  const bubble = el("div", "msg-bubble");
  let shown = text;
  const answer = kind === "confirmation" ? CONFIRMATION_ANSWER.exec(text) : null;
  if (answer) {
    shown = `${answer[2] === "confirmed" ? "✓ Confirmed" : "✕ Declined"} (${answer[1]})`;
    if (answer[3]) shown += ` — ${answer[3]}`;
  }
  if (label) bubble.append(el("span", "msg-kind", label), el("span", "visually-hidden", ": "));
  const body = el("span", "msg-text", shown);
  if (answer) body.dataset.raw = text;
  bubble.append(body);
  main.prepend(bubble);
  copyTexts.set(row, shown);
  stamp(row, createdAt);
  return row;
}

/** An assistant's bubble (text as sanitised Markdown) with its tool chips. */
export function assistantMessage(agent, text, { messageId = null, tools = [], streaming = false, createdAt = null } = {}) {
  const { row, main, meta } = messageRow("msg msg-assistant", agent?.name || "Assistant", { copy: "reply" });
  if (messageId !== null) row.dataset.messageId = String(messageId);
  const avatar = el("div", "msg-avatar", agent?.avatar || "🤖");
  avatar.setAttribute("aria-hidden", "true");
  const bubble = el("div", "msg-bubble");
  const body = el("div", "msg-text prose");
  bubble.append(body);
  main.insertBefore(bubble, meta);
  row.insertBefore(avatar, main);
  setAssistantText(row, text, { streaming });
  if (tools.length) {
    const list = el("ul", "msg-tools");
    list.setAttribute("aria-label", "Tools used");
    for (const name of tools) list.append(chip(toolLabel(name)));
    main.insertBefore(list, meta);
  }
  stamp(row, createdAt);
  return row;
}

/** Under a reply that drew on the archive (memory tools): the messages it used, readable (sources.js). */
export function addSources(row, sources) {
  if (!Array.isArray(sources) || !sources.length || row.querySelector(".msg-sources")) return;
  const main = row.querySelector(".msg-main");
  addSourceList(main, sources, main.querySelector(":scope > .msg-meta"));
}

/** Replaces an assistant bubble's text; while streaming, an empty text shows a typing indicator. */
export function setAssistantText(row, text, { streaming = false } = {}) {
  const body = row.querySelector(".msg-text");
  const bubble = row.querySelector(".msg-bubble");
  row.classList.toggle("is-streaming", streaming);
  if (streaming) row.setAttribute("aria-busy", "true");
  else row.removeAttribute("aria-busy");
  copyTexts.set(row, text || "");
  row.querySelector(".msg-copy")?.toggleAttribute("hidden", !text || streaming);
  if (!text && streaming) {
    const dots = el("span", "typing");
    dots.setAttribute("aria-label", "Writing a reply");
    dots.append(el("i"), el("i"), el("i"));
    body.replaceChildren(dots);
    bubble.hidden = false;
    return;
  }
  body.replaceChildren(renderMarkdown(text || ""));
  bubble.hidden = !text;
}

/** A notice in the log: an error from the server or the model provider, or a status line. */
export function noticeMessage(text, { level = "error", detail = "" } = {}) {
  const row = el("div", `msg msg-notice notice-${level}`);
  row.setAttribute("role", level === "error" ? "alert" : "status");
  const icon = el("span", "notice-icon", level === "error" ? "⚠" : "ℹ");
  icon.setAttribute("aria-hidden", "true");
  const body = el("div", "notice-body");
  body.append(el("strong", "", text));
  if (detail) body.append(el("span", "notice-detail", detail));
  row.append(icon, body);
  return row;
}

function resultText(block) {
  const content = block.content;
  if (Array.isArray(content)) return content.map((item) => (item && typeof item.text === "string" ? item.text : "")).join(" ");
  return typeof content === "string" ? content : "";
}

/**
 * One archived message as a log row, or null when it has nothing to show (a tool_result-only
 * message that succeeded). Assistant tool calls become chips; failed tool results a warning chip.
 */
export function historyMessage(message, agent) {
  const blocks = blocksOf(message.content);
  const text = textOf(blocks);
  const options = { messageId: message.id, createdAt: message.created_at };
  if (message.role === "assistant") {
    const tools = blocks.filter((block) => block.type === "tool_use").map((block) => block.name);
    if (!text && tools.length === 0) return null;
    const row = assistantMessage(agent, text, { ...options, tools });
    if (!text) row.classList.add("msg-tools-only");
    addSources(row, message.sources);
    return row;
  }
  const failures = blocks.filter((block) => block.type === "tool_result" && block.is_error);
  if (!text) {
    if (failures.length === 0) return null;
    const row = toolFailureRow(message.id);
    stamp(row, message.created_at);
    for (const failure of failures) addFailureChip(row, resultText(failure));
    return row;
  }
  return userMessage(text, { ...options, kind: message.kind || "typed" });
}
