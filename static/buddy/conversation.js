// The conversation log: chat bubbles built from archived messages (raw Anthropic content blocks)
// and from live frames. User text is shown as typed; assistant text through the safe Markdown
// subset; tool calls as small chips. Nothing from a message is ever parsed as HTML.

import { renderMarkdown } from "./markdown.js";
import { sourceLink } from "./sources.js";

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

/** The time tooltip of a message row: when it was archived (now, for a message that just arrived). */
export function stamp(node, createdAt) {
  if (!createdAt) return;
  const date = new Date(createdAt);
  if (!Number.isNaN(date.getTime())) node.title = timeFormat.format(date);
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
    main.append(list);
  }
  list.append(chip(toolLabel(name)));
}

/** A row of failed tool calls (the results of one round), as a reloaded turn shows it. */
export function toolFailureRow(messageId = null) {
  const row = el("div", "msg msg-assistant msg-tools-only msg-tool-failures");
  if (messageId !== null) row.dataset.messageId = String(messageId);
  const spacer = el("div", "msg-avatar msg-avatar-spacer");
  spacer.setAttribute("aria-hidden", "true");
  const list = el("ul", "msg-tools");
  list.setAttribute("aria-label", "Tool results");
  const main = el("div", "msg-main");
  main.append(list);
  row.append(spacer, main);
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
  const row = el("div", "msg msg-user");
  if (messageId !== null) row.dataset.messageId = String(messageId);
  if (pending) row.dataset.pending = "true";
  const label = KIND_LABELS[kind];
  if (label) row.dataset.kind = kind;
  const bubble = el("div", "msg-bubble");
  let shown = text;
  const answer = kind === "confirmation" ? CONFIRMATION_ANSWER.exec(text) : null;
  if (answer) {
    shown = `${answer[2] === "confirmed" ? "✓ Confirmed" : "✕ Declined"} (${answer[1]})`;
    if (answer[3]) shown += ` — ${answer[3]}`;
  }
  if (label) {
    const badge = el("span", "msg-kind", label);
    bubble.append(badge, el("span", "visually-hidden", ": "));
  } else {
    bubble.append(el("span", "visually-hidden", "You: "));
  }
  const body = el("span", "msg-text", shown);
  if (answer) body.dataset.raw = text;
  bubble.append(body);
  row.append(bubble);
  stamp(row, createdAt);
  return row;
}

/** An assistant's bubble (text through the safe Markdown subset) with its tool chips. */
export function assistantMessage(agent, text, { messageId = null, tools = [], streaming = false, createdAt = null } = {}) {
  const row = el("div", "msg msg-assistant");
  if (messageId !== null) row.dataset.messageId = String(messageId);
  const avatar = el("div", "msg-avatar", agent?.avatar || "🤖");
  avatar.setAttribute("aria-hidden", "true");
  const main = el("div", "msg-main");
  const bubble = el("div", "msg-bubble");
  const who = el("span", "visually-hidden", `${agent?.name || "Assistant"}: `);
  const body = el("div", "msg-text prose");
  bubble.append(who, body);
  main.append(bubble);
  row.append(avatar, main);
  setAssistantText(row, text, { streaming });
  if (tools.length) {
    const list = el("ul", "msg-tools");
    list.setAttribute("aria-label", "Tools used");
    for (const name of tools) list.append(chip(toolLabel(name)));
    main.append(list);
  }
  stamp(row, createdAt);
  return row;
}

/** Under a reply that drew on the archive (memory tools): a link to each message it used. */
export function addSources(row, sources) {
  if (!Array.isArray(sources) || !sources.length || row.querySelector(".msg-sources")) return;
  const box = el("p", "msg-sources");
  box.append(el("span", "msg-sources-label", "From the archive:"));
  for (const source of sources) {
    if (!source || typeof source.id !== "number") continue;
    box.append(" ", sourceLink(source));
  }
  row.querySelector(".msg-main").append(box);
}

/** Replaces an assistant bubble's text; while streaming, an empty text shows a typing indicator. */
export function setAssistantText(row, text, { streaming = false } = {}) {
  const body = row.querySelector(".msg-text");
  const bubble = row.querySelector(".msg-bubble");
  row.classList.toggle("is-streaming", streaming);
  if (streaming) row.setAttribute("aria-busy", "true");
  else row.removeAttribute("aria-busy");
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
