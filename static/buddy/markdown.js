// A tiny, safe Markdown subset for model output: paragraphs, **bold**, *em*, `code`, fenced code
// blocks, bullet and numbered lists, headings, and links to http(s) addresses only. Everything is
// built with createElement/textContent: model text is never parsed as HTML, so `<script>` or
// `onerror=` in a reply is shown as the characters it is.

const SAFE_URL = /^https?:\/\/[^\s]+$/i;

export function isSafeUrl(url) {
  return typeof url === "string" && SAFE_URL.test(url.trim());
}

function link(text, url) {
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.rel = "noopener noreferrer nofollow";
  anchor.target = "_blank";
  anchor.textContent = text;
  return anchor;
}

// One alternation, tried left to right at each position: code first so that nothing inside
// backticks is interpreted, then links, bold, emphasis and bare addresses.
const INLINE = new RegExp(
  [
    "`([^`\\n]+)`", // 1 code
    "\\[([^\\]\\n]+)\\]\\(([^)\\s]+)\\)", // 2 text, 3 url
    "\\*\\*([^\\n]+?)\\*\\*", // 4 bold
    "(?<![\\w])__([^\\n]+?)__(?![\\w])", // 5 bold
    "\\*([^*\\s](?:[^*\\n]*[^*\\s])?)\\*", // 6 em
    "(?<![\\w])_([^_\\s](?:[^_\\n]*[^_\\s])?)_(?![\\w])", // 7 em
    "(https?:\\/\\/[^\\s<>()]+[^\\s<>().,;:!?'\"])", // 8 bare url
  ].join("|"),
  "g",
);

/** Inline Markdown of one line or paragraph into `parent`, as text nodes and a few safe elements. */
export function appendInline(parent, text) {
  let last = 0;
  // matchAll works on a copy of the regex, so the recursion for bold and em cannot disturb it.
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) parent.append(text.slice(last, match.index));
    const [whole, code, linkText, linkUrl, bold, bold2, em, em2, bare] = match;
    if (code !== undefined) {
      const node = document.createElement("code");
      node.textContent = code;
      parent.append(node);
    } else if (linkText !== undefined) {
      if (isSafeUrl(linkUrl)) parent.append(link(linkText, linkUrl));
      else parent.append(whole);
    } else if (bold !== undefined || bold2 !== undefined) {
      const node = document.createElement("strong");
      appendInline(node, bold ?? bold2);
      parent.append(node);
    } else if (em !== undefined || em2 !== undefined) {
      const node = document.createElement("em");
      appendInline(node, em ?? em2);
      parent.append(node);
    } else if (bare !== undefined) {
      parent.append(link(bare, bare));
    }
    last = match.index + whole.length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

function appendLines(parent, lines) {
  lines.forEach((line, index) => {
    if (index > 0) parent.append(document.createElement("br"));
    appendInline(parent, line);
  });
}

const FENCE = /^\s*(```|~~~)\s*([\w+-]*)\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const QUOTE = /^\s*>\s?(.*)$/;

/** Markdown text to a DocumentFragment of safe elements. Non-strings render as nothing. */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  if (typeof source !== "string" || source === "") return fragment;
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let index = 0;

  while (index < lines.length) {
    const line = lines[index];

    if (line.trim() === "") {
      index += 1;
      continue;
    }

    const fence = line.match(FENCE);
    if (fence) {
      const body = [];
      index += 1;
      while (index < lines.length && !(lines[index].match(FENCE) && lines[index].trim().startsWith(fence[1]))) {
        body.push(lines[index]);
        index += 1;
      }
      index += 1; // the closing fence (or the end of an unterminated block while streaming)
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (fence[2]) code.dataset.language = fence[2];
      code.textContent = body.join("\n");
      pre.append(code);
      fragment.append(pre);
      continue;
    }

    const heading = line.match(HEADING);
    if (heading) {
      // Headings inside a chat bubble stay small: a strong paragraph, not a page-level <h1>.
      const node = document.createElement("p");
      node.className = `md-heading md-h${heading[1].length}`;
      const strong = document.createElement("strong");
      appendInline(strong, heading[2]);
      node.append(strong);
      fragment.append(node);
      index += 1;
      continue;
    }

    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const pattern = ordered ? NUMBERED : BULLET;
      const list = document.createElement(ordered ? "ol" : "ul");
      if (ordered) {
        const start = Number.parseInt(line.match(NUMBERED)[1], 10);
        if (start !== 1) list.start = start;
      }
      let item = null;
      while (index < lines.length) {
        const current = lines[index];
        const match = current.match(pattern);
        if (match) {
          item = document.createElement("li");
          appendInline(item, ordered ? match[2] : match[1]);
          list.append(item);
        } else if (current.trim() !== "" && /^\s+/.test(current) && item) {
          // An indented continuation line belongs to the item above.
          item.append(document.createElement("br"));
          appendInline(item, current.trim());
        } else {
          break;
        }
        index += 1;
      }
      fragment.append(list);
      continue;
    }

    if (QUOTE.test(line)) {
      const quoted = [];
      while (index < lines.length && QUOTE.test(lines[index])) {
        quoted.push(lines[index].match(QUOTE)[1]);
        index += 1;
      }
      const quote = document.createElement("blockquote");
      const paragraph = document.createElement("p");
      appendLines(paragraph, quoted);
      quote.append(paragraph);
      fragment.append(quote);
      continue;
    }

    const paragraphLines = [];
    while (
      index < lines.length &&
      lines[index].trim() !== "" &&
      !FENCE.test(lines[index]) &&
      !HEADING.test(lines[index]) &&
      !BULLET.test(lines[index]) &&
      !NUMBERED.test(lines[index]) &&
      !QUOTE.test(lines[index])
    ) {
      paragraphLines.push(lines[index]);
      index += 1;
    }
    const paragraph = document.createElement("p");
    appendLines(paragraph, paragraphLines);
    fragment.append(paragraph);
  }
  return fragment;
}
