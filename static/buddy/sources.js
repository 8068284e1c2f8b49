// Links to archived messages: a reply's sources and where a memory note came from. Each opens this
// page at that message (`?agent=&chat_id=&around=`), in its own chat. A reply's sources read as who
// said it, when, and a line of what was said; past the first few they fold behind "N more".

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const SHOWN_UNFOLDED = 3;
let listCounter = 0;

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : timeFormat.format(date);
}

function el(name, className, text) {
  const node = document.createElement(name);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The page opened at one archived message: its chat, its agent, a page of history around it. */
export function sourceHref({ id, agent, chat_id: chatId }) {
  const params = new URLSearchParams({ agent: agent || "", chat_id: chatId || "", around: String(id) });
  return `?${params}#message-${id}`; // relative to the page itself, wherever it is served
}

/** A link to an archived message, labelled by who said it and when. */
export function sourceLink(source, label) {
  const link = document.createElement("a");
  link.className = "source-link";
  link.textContent = label ?? `${source.role === "user" ? "You" : "Reply"} · ${when(source.created_at)}`;
  link.href = sourceHref(source);
  return link;
}

/** One source as a list item: a link whose text is who, when and the message's first line. */
function sourceItem(source) {
  const item = el("li", "source");
  const link = el("a", "source-link");
  link.href = sourceHref(source);
  const head = el("span", "source-head");
  head.append(el("span", "source-who", source.role === "user" ? "You" : "Reply"), " · ");
  const time = el("time", "source-when", when(source.created_at));
  time.dateTime = String(source.created_at ?? "");
  head.append(time);
  link.append(head);
  if (typeof source.snippet === "string" && source.snippet) {
    link.append(el("span", "visually-hidden", ": "), el("span", "source-snippet", source.snippet));
  }
  item.append(link);
  return item;
}

/**
 * The sources of a reply, into `container` before `before`: a labelled list, the first few shown and
 * the rest behind a "N more" button that unfolds them (and folds them again).
 */
export function addSourceList(container, sources, before = null) {
  const valid = sources.filter((source) => source && typeof source.id === "number");
  if (!valid.length) return;
  listCounter += 1;
  const box = el("div", "msg-sources");
  const label = el("p", "msg-sources-label", valid.length === 1 ? "From the archive" : `From the archive (${valid.length})`);
  label.id = `sources-label-${listCounter}`;
  const list = el("ul", "source-list");
  list.id = `sources-${listCounter}`;
  list.setAttribute("aria-labelledby", label.id);
  valid.forEach((source, index) => {
    const item = sourceItem(source);
    if (index >= SHOWN_UNFOLDED) item.hidden = true;
    list.append(item);
  });
  box.append(label, list);
  const folded = valid.length - SHOWN_UNFOLDED;
  if (folded > 0) {
    const more = el("button", "link-button sources-more", `${folded} more`);
    more.type = "button";
    more.setAttribute("aria-expanded", "false");
    more.setAttribute("aria-controls", list.id);
    more.addEventListener("click", () => {
      const open = more.getAttribute("aria-expanded") !== "true";
      [...list.children].slice(SHOWN_UNFOLDED).forEach((item) => {
        item.hidden = !open;
      });
      more.setAttribute("aria-expanded", String(open));
      more.textContent = open ? "Show fewer" : `${folded} more`;
      // The keyboard goes on at the first source the button brought.
      if (open) list.children[SHOWN_UNFOLDED]?.querySelector("a")?.focus();
    });
    box.append(more);
  }
  container.insertBefore(box, before);
}
