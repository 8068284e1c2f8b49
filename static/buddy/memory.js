// The Memory view beside the canvas: the notes Buddy keeps (this chat's and the user's profile),
// each editable, deletable and restorable from its versions, with a link to the message it came
// from, and the notes deleted recently, each restorable (README: Memory notes). Note text is shown
// as text, never parsed as HTML. When the server cannot be reached the view says so, keeps what it
// showed and tries again, waiting longer each time.

import { describeError } from "./errors.js";
import { sourceLink } from "./sources.js";

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const ROOT = "/memories/";
// Waits between tries while the server cannot be reached: doubling from the first to the last.
const RETRY_FIRST_MS = 1000;
const RETRY_LAST_MS = 30000;
// What an action answers when its request never reached the server (fetch rejected).
const UNREACHABLE = {
  status: 0,
  data: null,
  error: { status: 0, code: "network", detail: "Cannot reach Buddy; nothing changed. Try again in a moment.", errors: [] },
};

function el(name, className, text) {
  const node = document.createElement(name);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(label, className = "btn btn-small") {
  const node = el("button", className, label);
  node.type = "button";
  return node;
}

function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : timeFormat.format(date);
}

function shortPath(path) {
  return path.startsWith(ROOT) ? path.slice(ROOT.length) : path;
}

/** Who made a note's text: the model, the user, or the user restoring a text that came from a message. */
function authorship(note) {
  if (note.updated_by === "model") return "Kept by Buddy";
  return note.source_message_id ? "Restored by you" : "Edited by you";
}

/** The link to the message a note's (or a version's) text came from: the person's message that started
 * the turn (its prompt), not the row of the tool call, when the server knows it. */
function fromThisMessage(item) {
  const prompt = item.source_prompt_id ?? null;
  return sourceLink(
    {
      id: prompt ?? item.source_message_id,
      agent: item.source_agent,
      chat_id: item.source_chat_id,
      role: prompt === null ? "assistant" : "user",
    },
    "from this message",
  );
}

/** A note's `article` with its header naming the path (the header is returned to add to). */
function noteArticle(className, scope, path) {
  const card = el("article", className);
  card.dataset.path = path;
  card.dataset.scope = scope;
  const head = el("header", "note-head");
  const title = el("h4", "note-path", shortPath(path));
  title.title = path;
  head.append(title);
  card.append(head);
  return { card, head };
}

/** `request` (a promise of the API client), or UNREACHABLE when it never reached the server. */
async function reaching(request) {
  try {
    return await request;
  } catch {
    return UNREACHABLE;
  }
}

export class MemoryView {
  /**
   * `urls`: the API's `notes`, `noteVersions` and `noteRestore` paths; `place`: the chat shown;
   * `noteBytes`: the most a note holds (UTF-8); `notify(text, level)` shows a toast.
   * dom: `panel`, `canvasPanel`, `chatList`, `profileList`, `count`, `showMemory`, `showCanvas`.
   */
  constructor({ api, urls, place, noteBytes, notify, dom }) {
    this.api = api;
    this.urls = urls;
    this.place = place;
    this.noteBytes = noteBytes;
    this.notify = notify;
    this.dom = dom;
    this.generation = 0;
    this.retryDelay = RETRY_FIRST_MS;
    this.retryTimer = null;
    this.buildOwnParts();
    dom.showMemory.addEventListener("click", () => this.show(true));
    dom.showCanvas.addEventListener("click", () => this.show(false));
    window.addEventListener("online", () => this.retryNow());
  }

  /** The parts this view adds to the panel: the line saying the server cannot be reached (at the top)
   * and the "Recently deleted" section (at the end). */
  buildOwnParts() {
    const scroll = this.dom.panel.querySelector(".memory-scroll") ?? this.dom.panel;
    const status = el("div", "memory-status");
    status.setAttribute("role", "status");
    const text = el("p", "memory-status-text");
    const now = button("Try now");
    now.addEventListener("click", () => this.retryNow());
    status.append(text, now);
    status.hidden = true;
    scroll.prepend(status);
    const section = el("section", "memory-scope memory-deleted");
    section.setAttribute("aria-labelledby", "memory-deleted-heading");
    const heading = el("h3", "memory-scope-title", "Recently deleted");
    heading.id = "memory-deleted-heading";
    const hint = el("span", "memory-scope-hint", " (restore brings a note back as it was)");
    heading.append(hint);
    const list = el("div", "memory-list");
    list.id = "memory-deleted";
    section.append(heading, list);
    scroll.append(section);
    this.statusBox = status;
    this.statusText = text;
    this.deletedList = list;
  }

  get visible() {
    return !this.dom.panel.hidden;
  }

  show(visible) {
    this.dom.panel.hidden = !visible;
    this.dom.canvasPanel.hidden = visible;
    document.body.dataset.view = visible ? "memory" : "canvas";
    if (visible) {
      this.refresh();
      this.dom.showCanvas.focus();
    } else {
      this.dom.showMemory.focus();
    }
  }


  /** Reloads both lists and the deleted notes (a chat's notes change with its turns, and with another
   * tab's edits). While the server cannot be reached, says so, keeps what it showed and tries again. */
  async refresh() {
    if (!this.visible) return;
    const generation = ++this.generation;
    const chat = this.place.chat();
    let answers;
    try {
      answers = await Promise.all([
        this.api.get(this.urls.notes, chat),
        this.api.get(this.urls.notes, { ...chat, deleted: "1" }),
      ]);
    } catch {
      answers = null; // fetch rejected: no answer from the server at all
    }
    if (generation !== this.generation) return;
    if (answers === null || answers.some(({ status }) => status === 0 || status >= 500)) {
      this.unreachable();
      return;
    }
    this.reachable();
    const [{ status, data }, gone] = answers;
    const notes = status === 200 && data ? data : { chat: [], profile: [] };
    this.render("chat", notes.chat || [], this.dom.chatList);
    this.render("profile", notes.profile || [], this.dom.profileList);
    const total = (notes.chat || []).length + (notes.profile || []).length;
    this.dom.count.textContent = total === 1 ? "1 note" : `${total} notes`;
    const deleted = gone.status === 200 && gone.data ? gone.data : { chat: [], profile: [] };
    this.renderDeleted([
      ...(deleted.chat || []).map((note) => ({ scope: "chat", note })),
      ...(deleted.profile || []).map((note) => ({ scope: "profile", note })),
    ]);
  }

  /** The server did not answer: say so (keeping what is shown) and try again later, each wait longer. */
  unreachable() {
    this.statusText.textContent = "Cannot reach Buddy — retrying…";
    this.statusBox.hidden = false;
    this.dom.panel.dataset.reachable = "no";
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.refresh(), this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, RETRY_LAST_MS);
  }

  reachable() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.retryDelay = RETRY_FIRST_MS;
    this.statusBox.hidden = true;
    this.statusText.textContent = "";
    delete this.dom.panel.dataset.reachable;
  }

  retryNow() {
    if (this.retryTimer === null) return;
    this.retryDelay = RETRY_FIRST_MS;
    this.refresh();
  }

  render(scope, notes, list) {
    list.replaceChildren();
    if (!notes.length) {
      const empty = el(
        "p",
        "memory-empty",
        scope === "chat" ? "Nothing yet. Notes appear here when Buddy keeps one." : "Nothing Buddy remembers across chats yet.",
      );
      list.append(empty);
      return;
    }
    for (const note of notes) list.append(this.card(scope, note));
  }

  card(scope, note) {
    const { card, head } = noteArticle("note", scope, note.path);
    const body = el("p", "note-text", note.content);
    const meta = el("p", "note-meta");
    meta.append(`${authorship(note)} · ${when(note.updated_at)}`);
    if (note.source_message_id) meta.append(" · ", fromThisMessage(note));
    const actions = el("div", "note-actions");
    const edit = button("Edit");
    edit.setAttribute("aria-label", `Edit ${note.path}`);
    const history = button("History");
    history.setAttribute("aria-label", `History of ${note.path}`);
    history.setAttribute("aria-expanded", "false");
    const remove = button("Delete", "btn btn-small btn-danger-quiet");
    remove.setAttribute("aria-label", `Delete ${note.path}`);
    actions.append(edit, history, remove);
    card.append(body, meta, actions);
    edit.addEventListener("click", () => this.edit(card, scope, note));
    history.addEventListener("click", () => this.toggleHistory(card, scope, note.path, history));
    remove.addEventListener("click", () => this.remove(card, scope, note.path));
    return card;
  }

  edit(card, scope, note) {
    const form = el("form", "note-edit");
    const label = el("label", "visually-hidden", `Text of ${note.path}`);
    const input = el("textarea", "input-small note-input");
    input.id = `note-edit-${Math.random().toString(36).slice(2)}`;
    label.htmlFor = input.id;
    input.value = note.content;
    input.rows = Math.min(12, Math.max(3, note.content.split("\n").length + 1));
    const save = el("button", "btn btn-small btn-primary", "Save");
    save.type = "submit";
    const cancel = button("Cancel");
    const error = el("p", "note-error");
    error.setAttribute("role", "alert");
    const bar = el("div", "note-actions");
    bar.append(save, cancel);
    form.append(label, input, error, bar);
    card.querySelector(".note-text").replaceWith(form);
    card.querySelector(":scope > .note-actions").hidden = true;
    input.focus();
    cancel.addEventListener("click", () => this.refresh());
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const size = new TextEncoder().encode(input.value).length;
      if (size > this.noteBytes) {
        error.textContent = `A note holds at most ${this.noteBytes.toLocaleString("en")} bytes; this text has ${size.toLocaleString("en")}.`;
        return;
      }
      save.disabled = true;
      const answer = await reaching(
        this.api.send("PUT", this.urls.notes, { scope, path: note.path, content: input.value, ...this.place.chat() }),
      );
      save.disabled = false;
      if (answer.status === 200) {
        this.notify(`Saved ${shortPath(note.path)}.`, "success");
        await this.refresh();
        this.focusNote(note.path); // the Save button went with the form
      } else {
        error.textContent = describeError(answer.error);
      }
    });
  }

  async remove(card, scope, path) {
    const { status, error } = await reaching(this.api.remove(this.urls.notes, { ...this.place.chat(), scope, path }));
    if (status !== 204) {
      this.notify(describeError(error), "error");
      return;
    }
    // The note is gone from its list, not lost: it is under "Recently deleted", where the keyboard goes.
    this.notify(`Deleted ${shortPath(path)}. Restore it from Recently deleted.`, "success");
    await this.refresh();
    const restore = [...this.deletedList.querySelectorAll(".note")]
      .find((item) => item.dataset.path === path && item.dataset.scope === scope)
      ?.querySelector("button");
    (restore ?? this.dom.showCanvas).focus();
  }

  /** The deleted notes of this chat and of the profile, most recently deleted first, each restorable. */
  renderDeleted(items) {
    const list = this.deletedList;
    list.replaceChildren();
    if (!items.length) {
      list.append(el("p", "memory-empty", "Nothing deleted recently."));
      return;
    }
    items.sort((a, b) => (a.note.deleted_at < b.note.deleted_at ? 1 : -1));
    for (const { scope, note } of items) list.append(this.deletedCard(scope, note));
  }

  deletedCard(scope, note) {
    const { card, head } = noteArticle("note note-gone", scope, note.path);
    head.append(el("span", "note-scope", scope === "chat" ? "this chat" : "all chats"));
    const body = el("p", "note-text note-gone-text", note.content);
    const meta = el("p", "note-meta");
    const who = note.deleted_by === "model" ? "Buddy" : "you";
    meta.append(`Deleted by ${who} · ${when(note.deleted_at)}`);
    if (note.source_message_id) meta.append(" · ", fromThisMessage(note));
    const restore = button("Restore");
    restore.setAttribute("aria-label", `Restore ${note.path}`);
    restore.addEventListener("click", async () => {
      restore.disabled = true;
      const restored = await this.restore({ scope, path: note.path });
      if (!restored) restore.disabled = false;
    });
    const actions = el("div", "note-actions");
    actions.append(restore);
    card.append(body, meta, actions);
    return card;
  }

  /** One page of a note's versions, newest first: `{versions, nextBefore}` (null on the last page). */
  async versions(scope, path, before = null) {
    const params = { ...this.place.chat(), scope, path };
    if (before !== null) params.before = String(before);
    const { status, data, error } = await reaching(this.api.get(this.urls.noteVersions, params));
    if (status === 0) this.notify(describeError(error), "error");
    const ok = status === 200 && data && Array.isArray(data.versions);
    return { versions: ok ? data.versions : [], nextBefore: ok ? (data.next_before ?? null) : null };
  }

  /** Restores `{version_id}` or the deleted note `{scope, path}`; the lists are drawn again, and the
   * keyboard goes on at the restored note. Answers whether it was restored. */
  async restore(what) {
    const { status, data, error } = await reaching(
      this.api.send("POST", this.urls.noteRestore, { ...what, ...this.place.chat() }),
    );
    if (status !== 200) {
      this.notify(describeError(error), "error");
      return false;
    }
    this.notify(`Restored ${shortPath(data.path)}.`, "success");
    await this.refresh();
    this.focusNote(data.path);
    return true;
  }

  /** The keyboard goes on at the note at `path` (its first action), or at the view's own button. */
  focusNote(path) {
    const lists = [this.dom.chatList, this.dom.profileList];
    const card = lists.flatMap((list) => [...list.querySelectorAll(".note")]).find((n) => n.dataset.path === path);
    (card?.querySelector(".note-actions button") ?? this.dom.showCanvas).focus();
  }

  async toggleHistory(card, scope, path, toggle) {
    const open = card.querySelector(".note-history");
    if (open) {
      open.remove();
      toggle.setAttribute("aria-expanded", "false");
      return;
    }
    const history = el("div", "note-history");
    const list = el("ol", "note-versions");
    list.setAttribute("aria-label", `Versions of ${path}`);
    history.append(list);
    await this.moreVersions(history, list, scope, path, null);
    card.append(history);
    toggle.setAttribute("aria-expanded", "true");
  }

  /** Appends the page of versions older than `before` (from the newest when null) to `list`, and a
   * button for the next page while there is one. */
  async moreVersions(history, list, scope, path, before) {
    const { versions, nextBefore } = await this.versions(scope, path, before);
    const firstNew = list.children.length;
    for (const version of versions) list.append(this.versionItem(version, list.children.length === 0));
    history.querySelector(".note-versions-more")?.remove();
    // The button that asked for this page is gone: the keyboard goes on at the first version it brought.
    if (before !== null) list.children[firstNew]?.querySelector("button")?.focus();
    if (nextBefore === null) return;
    const more = button("Show older versions", "btn btn-small note-versions-more");
    more.setAttribute("aria-label", `Show older versions of ${path}`);
    more.addEventListener("click", async () => {
      more.disabled = true;
      await this.moreVersions(history, list, scope, path, nextBefore);
    });
    history.append(more);
  }

  versionItem(version, current) {
    const item = el("li", "note-version");
    const what = version.after === null ? "deleted" : version.before === null ? "created" : "changed";
    const who = version.changed_by === "model" ? "Buddy" : "you";
    const restored = version.changed_by === "user" && version.source_message_id && version.after !== null;
    const line = el("p", "note-meta", `${when(version.changed_at)} · ${restored ? "restored" : what} by ${who}`);
    if (version.source_message_id) line.append(" · ", fromThisMessage(version));
    const text = el("p", "note-version-text", version.after ?? version.before ?? "");
    item.append(line, text);
    if (current) {
      item.append(el("span", "note-current", "current"));
    } else {
      const restore = button("Restore this version");
      // The visible words start the name: speech input finds the button by what it shows.
      restore.setAttribute("aria-label", `Restore this version, of ${when(version.changed_at)}`);
      restore.addEventListener("click", () => this.restore({ version_id: version.id }));
      item.append(restore);
    }
    return item;
  }
}
