// Links to archived messages: a reply's sources and where a memory note came from. Each opens this
// page at that message (`?agent=&chat_id=&around=`), in its own chat.

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : timeFormat.format(date);
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
