// Draws the canvas state (see reducer.js) into its region: each element an <article> headed by its
// title. Model-provided strings only ever reach the page through textContent, attribute values we
// check, or sanitised Markdown (markdown.js) — never as HTML.
//
// Rendering is keyed by element id: an element whose fields did not change keeps its DOM node, so a
// playing video, a focused button or a scrolled table survive unrelated canvas changes.

import { renderChart } from "./chart.js";
import { renderMarkdown } from "./markdown.js";
import { safeMediaUrl } from "./urls.js";

const TYPE_LABELS = {
  card: "Card",
  text: "Text",
  chart: "Chart",
  table: "Table",
  media: "Media",
  confirmation: "Confirmation",
};
const MEDIA_LABELS = { image: "Image", audio: "Audio", video: "Video" };
let headingCounter = 0;

function el(name, attributes = {}, children = []) {
  const node = document.createElement(name);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function asText(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

function article(element, headingText, { hideHeading = false } = {}) {
  headingCounter += 1;
  const headingId = `canvas-el-${headingCounter}`;
  const node = el("article", {
    className: `el el-${element.type}`,
    "data-id": element.id,
    "data-type": element.type,
    "aria-labelledby": headingId,
  });
  const header = el("header", { className: `el-header${hideHeading ? " visually-hidden" : ""}` }, [
    el("span", { className: "el-kind", text: TYPE_LABELS[element.type] ?? "Element", "aria-hidden": "true" }),
    el("h3", { id: headingId, className: "el-title", text: headingText }),
  ]);
  node.append(header);
  return node;
}

function renderCard(element) {
  const node = article(element, asText(element.title) || "Card");
  if (element.body !== undefined && element.body !== null && asText(element.body) !== "") {
    const body = el("div", { className: "el-body prose" });
    body.append(renderMarkdown(asText(element.body)));
    node.append(body);
  }
  return node;
}

function renderText(element) {
  const title = asText(element.title);
  const node = article(element, title || "Text", { hideHeading: !title });
  // Markdown, as a card's body: tables, code and emphasis render; raw HTML stays text.
  const body = el("div", { className: "el-body prose" });
  body.append(renderMarkdown(asText(element.content)));
  node.append(body);
  return node;
}

function renderChartElement(element, options) {
  const node = article(element, asText(element.title) || "Chart");
  const figure = el("figure", { className: "chart-figure" });
  figure.append(renderChart(element, { compact: Boolean(options.compact) }));
  node.append(figure);
  return node;
}

function renderTable(element) {
  const node = article(element, asText(element.title) || "Table");
  const columns = Array.isArray(element.columns) ? element.columns.map(asText) : [];
  // A table of a few columns fits one canvas column; a wider one takes two.
  if (columns.length > 3) node.classList.add("is-wide");
  const rows = Array.isArray(element.rows) ? element.rows : [];
  const table = el("table", { "aria-labelledby": node.getAttribute("aria-labelledby") });
  const cellsOf = (row) =>
    Array.isArray(row) ? row : row && typeof row === "object" ? columns.map((column) => row[column]) : [row];
  // A column of numbers only is right-aligned, heading included, so the digits line up.
  const numeric = columns.map(
    (_, index) => rows.length > 0 && rows.every((row) => typeof cellsOf(row)[index] === "number"),
  );
  const head = el("thead");
  const headRow = el("tr");
  columns.forEach((column, index) => {
    headRow.append(el("th", { scope: "col", className: numeric[index] ? "num" : undefined, text: column }));
  });
  head.append(headRow);
  table.append(head);
  const body = el("tbody");
  for (const row of rows) {
    // A row may be a list of cells or an object keyed by column name.
    const cells = cellsOf(row);
    const tr = el("tr");
    const width = Math.max(columns.length, cells.length);
    for (let index = 0; index < width; index += 1) {
      const value = cells[index];
      tr.append(el("td", { className: typeof value === "number" ? "num" : undefined, text: asText(value) }));
    }
    body.append(tr);
  }
  table.append(body);
  if (rows.length === 0) {
    node.append(el("p", { className: "el-muted", text: "No rows." }));
  }
  // Focusable so keyboard users can scroll a wide table.
  node.append(el("div", { className: "table-wrap", tabindex: "0", role: "group", "aria-label": "Table (scrollable)" }, [table]));
  return node;
}

function renderMedia(element) {
  const kind = ["image", "audio", "video"].includes(element.media_type) ? element.media_type : "image";
  const title = asText(element.title) || MEDIA_LABELS[kind];
  const node = article(element, title);
  const url = safeMediaUrl(element.url);
  if (!url) {
    node.append(el("p", { className: "el-muted", text: "This media address can't be shown here." }));
    return node;
  }
  let media;
  if (kind === "image") {
    media = el("img", { src: url, alt: title, loading: "lazy", decoding: "async" });
  } else {
    media = el(kind, { src: url, controls: true, preload: "metadata", "aria-label": title });
  }
  const failed = el("p", { className: "el-muted el-media-failed", hidden: true, text: "This media could not be loaded." });
  media.addEventListener("error", () => {
    media.hidden = true;
    failed.hidden = false;
  });
  node.append(el("div", { className: `media-frame media-${kind}` }, [media, failed]));
  return node;
}

const QUESTION_SCROLLS_PAST = 600; // characters: a longer question may scroll, so the keyboard can reach it

function renderConfirmation(element, options) {
  const node = article(element, asText(element.title) || "Please confirm");
  if (element.message !== undefined) {
    // Shown whole, however long (a note the user is asked to keep): the text scrolls inside the card.
    const message = el("p", { className: "el-body el-plain el-question", text: asText(element.message) });
    if (message.textContent.length > QUESTION_SCROLLS_PAST) {
      message.setAttribute("tabindex", "0");
      message.setAttribute("role", "group");
      message.setAttribute("aria-label", "Question (scrollable)");
    }
    node.append(message);
  }
  const confirmLabel = asText(element.confirm_label) || "Confirm";
  const cancelLabel = asText(element.cancel_label) || "Cancel";
  const answered = element.answered;
  if (answered === "confirmed" || answered === "declined") {
    node.classList.add("is-answered");
    node.dataset.answered = answered;
    const chosen = answered === "confirmed" ? confirmLabel : cancelLabel;
    node.append(
      el("p", { className: `el-answer el-answer-${answered}`, role: "status" }, [
        el("span", { className: "el-answer-icon", "aria-hidden": "true", text: answered === "confirmed" ? "✓" : "✕" }),
        document.createTextNode(`${answered === "confirmed" ? "Confirmed" : "Declined"} — you chose “${chosen}”.`),
      ]),
    );
    // What the answer did, when the server says (a question about the user's memory).
    if (element.outcome !== undefined) node.append(el("p", { className: "el-outcome", text: asText(element.outcome) }));
    return node;
  }
  const pending = options.pendingConfirmations?.has(element.id) ?? false;
  const confirm = el("button", { type: "button", className: "btn btn-primary", text: confirmLabel, disabled: pending });
  const cancel = el("button", { type: "button", className: "btn", text: cancelLabel, disabled: pending });
  confirm.addEventListener("click", () => options.onConfirm?.(element.id, true));
  cancel.addEventListener("click", () => options.onConfirm?.(element.id, false));
  node.append(el("div", { className: "el-actions" }, [confirm, cancel]));
  if (pending) node.append(el("p", { className: "el-muted", role: "status", text: "Sending your answer…" }));
  return node;
}

function renderUnknown(element) {
  const node = article(element, asText(element.title) || "Element");
  node.append(el("p", { className: "el-muted", text: "This kind of element can't be shown yet." }));
  return node;
}

const RENDERERS = {
  card: renderCard,
  text: renderText,
  chart: renderChartElement,
  table: renderTable,
  media: renderMedia,
  confirmation: renderConfirmation,
};

/** A detached <article> for one element. */
export function renderElement(element, options = {}) {
  const render = RENDERERS[element.type] ?? renderUnknown;
  return render(element, options);
}

function emptyState() {
  return el("div", { className: "canvas-empty" }, [
    el("div", { className: "canvas-empty-art", "aria-hidden": "true", text: "◇" }),
    el("p", { className: "canvas-empty-title", text: "Nothing on the canvas yet" }),
    el("p", { className: "canvas-empty-hint", text: "Ask for a chart, a table or a card and it appears here." }),
  ]);
}

const rendered = new WeakMap(); // root -> Map(id -> {signature, node})
const COMPACT_BELOW = 560;

/** Whether charts in `root` are drawn for a narrow space; re-render when this changes. */
export function isCompact(root) {
  return root.clientWidth > 0 && root.clientWidth < COMPACT_BELOW;
}

/**
 * Makes `root` show `state.elements` in order. Options: `onConfirm(id, confirmed)` for confirmation
 * buttons, `pendingConfirmations` (a Set of ids whose answer is on its way).
 */
export function renderCanvas(root, state, options = {}) {
  const elements = Array.isArray(state?.elements) ? state.elements : [];
  const previous = rendered.get(root) ?? new Map();
  const next = new Map();

  if (elements.length === 0) {
    root.replaceChildren(emptyState());
    rendered.set(root, next);
    root.dataset.count = "0";
    return;
  }
  root.querySelector(":scope > .canvas-empty")?.remove();

  const compact = isCompact(root);
  const renderOptions = { ...options, compact };
  const nodes = elements.map((element) => {
    const pending = options.pendingConfirmations?.has(element.id) ? "1" : "0";
    const layout = element.type === "chart" && compact ? "c" : "w";
    const signature = `${pending}${layout}${JSON.stringify(element)}`;
    const known = previous.get(element.id);
    const node = known && known.signature === signature ? known.node : renderElement(element, renderOptions);
    next.set(element.id, { signature, node });
    return node;
  });

  const keep = new Set(nodes);
  for (const child of [...root.children]) if (!keep.has(child)) child.remove();
  // Move a node only when it is out of place: re-inserting a media element would pause it.
  nodes.forEach((node, index) => {
    const current = root.children[index];
    if (current !== node) root.insertBefore(node, current ?? null);
  });
  rendered.set(root, next);
  root.dataset.count = String(elements.length);
}
