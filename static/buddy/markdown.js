// Markdown from the model (replies, cards, canvas text) as safe DOM, through vendored libraries
// (static/buddy/vendor/README.md): marked parses GitHub-flavoured Markdown (tables, fenced code, task
// lists, autolinks), highlight.js colours code in the languages registered below, DOMPurify keeps only
// an allow-list of elements and attributes. Model output is never interpreted as HTML: raw HTML in the
// Markdown is written out as the characters it is before anything is parsed as HTML, and DOMPurify
// then removes whatever else is not on the list (no `style`, no event handler, links only to
// http(s), mailto or this site, images only from this site or BUDDY_MEDIA_HOSTS).

import { copyButton } from "./copy.js";
import { isExternal, safeImageUrl, safeLinkUrl } from "./urls.js";
import DOMPurify from "./vendor/dompurify/purify.es.mjs";
import hljs from "./vendor/highlight.js/core.min.js";
import bash from "./vendor/highlight.js/languages/bash.min.js";
import css from "./vendor/highlight.js/languages/css.min.js";
import diff from "./vendor/highlight.js/languages/diff.min.js";
import javascript from "./vendor/highlight.js/languages/javascript.min.js";
import json from "./vendor/highlight.js/languages/json.min.js";
import markdown from "./vendor/highlight.js/languages/markdown.min.js";
import plaintext from "./vendor/highlight.js/languages/plaintext.min.js";
import python from "./vendor/highlight.js/languages/python.min.js";
import shell from "./vendor/highlight.js/languages/shell.min.js";
import sql from "./vendor/highlight.js/languages/sql.min.js";
import typescript from "./vendor/highlight.js/languages/typescript.min.js";
import xml from "./vendor/highlight.js/languages/xml.min.js";
import yaml from "./vendor/highlight.js/languages/yaml.min.js";
import { Marked } from "./vendor/marked/marked.esm.js";

const LANGUAGES = { bash, css, diff, javascript, json, markdown, plaintext, python, shell, sql, typescript, xml, yaml };
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);

const LANGUAGE_LABEL_CHARS = 40;
let mediaHosts = [];

/** The hosts (BUDDY_MEDIA_HOSTS) images in Markdown may load from, besides this site. */
export function configureMarkdown({ mediaHosts: hosts = [] } = {}) {
  mediaHosts = hosts.map((host) => String(host).toLowerCase());
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (char) => ESCAPES[char]);
}

function attribute(name, value) {
  return value ? ` ${name}="${escapeHtml(value)}"` : "";
}

/** The registered highlight.js language a fence's info string names (`js`, `Python`, `sh` …), or "". */
function languageOf(info) {
  const name = (info || "").trim().split(/\s+/)[0].toLowerCase();
  const language = name ? hljs.getLanguage(name) : undefined;
  return language ? name : "";
}

const renderer = {
  // Raw HTML (a block or a tag inside a line) is text: `<script>` shows as the characters it is.
  html({ text, block }) {
    return block ? `<p>${escapeHtml(text.trim())}</p>` : escapeHtml(text);
  },
  // Headings inside a chat bubble or a card stay small: a strong paragraph, not a page-level heading
  // (the page's own headings are what a screen reader navigates by).
  heading({ tokens, depth }) {
    return `<p class="md-heading md-h${depth}"><strong>${this.parser.parseInline(tokens)}</strong></p>\n`;
  },
  code({ text, lang }) {
    const language = languageOf(lang);
    const body = language ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHtml(text);
    const label = (lang || "").trim().split(/\s+/)[0].slice(0, LANGUAGE_LABEL_CHARS);
    const className = language ? `hljs language-${language}` : "hljs";
    return `<pre><code class="${className}"${attribute("data-language", label)}>${body}</code></pre>\n`;
  },
  checkbox({ checked }) {
    return checked ? "☑ " : "☐ ";
  },
  link({ href, title, tokens }) {
    const inner = this.parser.parseInline(tokens);
    const url = safeLinkUrl(href);
    if (!url) return inner; // a javascript: or data: link is its text, not a link
    return `<a${attribute("href", url)}${attribute("title", title)}>${inner}</a>`;
  },
  image({ href, title, text }) {
    const source = safeImageUrl(href, mediaHosts);
    if (source) return `<img${attribute("src", source)}${attribute("alt", text)}${attribute("title", title)} loading="lazy">`;
    // An image from a host the page may not load from: a link to it (when it is one), never a request.
    const url = safeLinkUrl(href);
    return url ? `<a${attribute("href", url)}>${escapeHtml(text || url)}</a>` : escapeHtml(text);
  },
};

const parser = new Marked({ gfm: true, breaks: true, async: false });
parser.use({ renderer });

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A" || !node.hasAttribute("href")) return;
  node.setAttribute("rel", "noopener noreferrer");
  if (isExternal(node.getAttribute("href"))) node.setAttribute("target", "_blank");
});

const PURIFY = {
  ALLOWED_TAGS: [
    "a", "blockquote", "br", "code", "del", "em", "hr", "img", "li", "ol", "p", "pre", "span", "strong",
    "table", "tbody", "td", "th", "thead", "tr", "ul",
  ],
  ALLOWED_ATTR: ["align", "alt", "class", "data-language", "href", "loading", "src", "start", "title"],
  // Attributes whose value is not an address: not held to ALLOWED_URI_REGEXP below.
  ADD_URI_SAFE_ATTR: ["align", "data-language", "loading", "start"],
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  // Links: http(s), mailto, or a path on this site ("/x", never "//host" or "/\host").
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|\/(?![/\\]))/i,
  RETURN_DOM_FRAGMENT: true,
};

/** A fenced code block with a header: the language it says it is, and a Copy button. */
function decorateCode(pre) {
  const code = pre.querySelector("code");
  const block = document.createElement("div");
  block.className = "code-block";
  const head = document.createElement("div");
  head.className = "code-head";
  const label = document.createElement("span");
  label.className = "code-lang";
  label.textContent = code?.dataset.language || "code";
  head.append(label, copyButton("code", () => code?.textContent ?? pre.textContent, "copy-button code-copy"));
  pre.replaceWith(block);
  // Focusable, so a keyboard can scroll a long line into view.
  pre.tabIndex = 0;
  block.append(head, pre);
}

/** A table scrolls sideways on its own when it is wider than the bubble or the card. */
function decorateTable(table) {
  const wrap = document.createElement("div");
  wrap.className = "md-table";
  wrap.tabIndex = 0;
  wrap.setAttribute("role", "group");
  wrap.setAttribute("aria-label", "Table (scrollable)");
  table.replaceWith(wrap);
  wrap.append(table);
}

/** Markdown text to a DocumentFragment of safe elements. Non-strings render as nothing. */
export function renderMarkdown(source) {
  if (typeof source !== "string" || source === "") return document.createDocumentFragment();
  const fragment = purifier.sanitize(parser.parse(source), PURIFY);
  for (const pre of fragment.querySelectorAll("pre")) decorateCode(pre);
  for (const table of fragment.querySelectorAll("table")) decorateTable(table);
  return fragment;
}
