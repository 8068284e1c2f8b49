// The Memory view beside the canvas: the notes Buddy keeps (this chat's and the user's profile),
// each editable, deletable and restorable from its versions, with a link to the message it came
// from (README: Memory notes). Note text is shown as text, never parsed as HTML.

import { describeError } from "./errors.js";
import { sourceLink } from "./sources.js";

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const ROOT = "/memories/";

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
    dom.showMemory.addEventListener("click", () => this.show(true));
    dom.showCanvas.addEventListener("click", () => this.show(false));
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


  /**
   * Reloads both lists (a chat's notes change with its turns, and with another tab's edits). `focus`:
   * the path of a note whose Edit button gets the keyboard afterwards (the button that acted on it
   * is gone with the old list, and the focus must not fall to the page's body).
   */
  async refresh({ focus = null } = {}) {
    if (!this.visible) return;
    const generation = ++this.generation;
    const { status, data } = await this.api.get(this.urls.notes, this.place.chat());
    if (generation !== this.generation) return;
    const notes = status === 200 && data ? data : { chat: [], profile: [] };
    this.render("chat", notes.chat || [], this.dom.chatList);
    this.render("profile", notes.profile || [], this.dom.profileList);
    const total = (notes.chat || []).length + (notes.profile || []).length;
    this.dom.count.textContent = total === 1 ? "1 note" : `${total} notes`;
    if (focus !== null) {
      const card = [...this.dom.panel.querySelectorAll(".note[data-path]")].find((node) => node.dataset.path === focus);
      (card?.querySelector(".note-actions button") ?? this.dom.showCanvas).focus();
    }
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
    const card = el("article", "note");
    card.dataset.path = note.path;
    card.dataset.scope = scope;
    const head = el("header", "note-head");
    const title = el("h4", "note-path", shortPath(note.path));
    title.title = note.path;
    head.append(title);
    const body = el("p", "note-text", note.content);
    const meta = el("p", "note-meta");
    meta.append(`${note.updated_by === "model" ? "Kept by Buddy" : "Edited by you"} · ${when(note.updated_at)}`);
    if (note.source_message_id) {
      // The person's message the note came from (its turn's prompt), not the row of the tool call.
      const id = note.source_prompt_id ?? note.source_message_id;
      meta.append(" · ");
      meta.append(sourceLink({ id, agent: note.source_agent, chat_id: note.source_chat_id }, "from this message"));
    }
    const actions = el("div", "note-actions");
    const edit = button("Edit");
    edit.setAttribute("aria-label", `Edit ${note.path}`);
    const history = button("History");
    history.setAttribute("aria-label", `History of ${note.path}`);
    history.setAttribute("aria-expanded", "false");
    const remove = button("Delete", "btn btn-small btn-danger-quiet");
    remove.setAttribute("aria-label", `Delete ${note.path}`);
    actions.append(edit, history, remove);
    card.append(head, body, meta, actions);
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
    cancel.addEventListener("click", () => this.refresh({ focus: note.path }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const size = new TextEncoder().encode(input.value).length;
      if (size > this.noteBytes) {
        error.textContent = `A note holds at most ${this.noteBytes.toLocaleString("en")} bytes; this text has ${size.toLocaleString("en")}.`;
        return;
      }
      save.disabled = true;
      const answer = await this.api.send("PUT", this.urls.notes, {
        scope,
        path: note.path,
        content: input.value,
        ...this.place.chat(),
      });
      save.disabled = false;
      if (answer.status === 200) {
        this.notify(`Saved ${shortPath(note.path)}.`, "success");
        this.refresh({ focus: note.path });
      } else {
        error.textContent = describeError(answer.error);
      }
    });
  }

  async remove(card, scope, path) {
    const { status, error } = await this.api.remove(this.urls.notes, { ...this.place.chat(), scope, path });
    if (status !== 204) {
      this.notify(describeError(error), "error");
      return;
    }
    // The note is gone from the list, but not lost: offer its last version back right here.
    const gone = el("div", "note note-deleted");
    gone.dataset.path = path;
    const text = el("p", "note-meta", `Deleted ${shortPath(path)}.`);
    const undo = button("Restore");
    undo.setAttribute("aria-label", `Restore ${path}`);
    gone.append(text, undo);
    card.replaceWith(gone);
    undo.focus(); // the Delete button went with its card
    undo.addEventListener("click", async () => {
      const { versions } = await this.versions(scope, path);
      if (versions.length) await this.restore(versions[0].id);
    });
  }

  /** One page of a note's versions, newest first: `{versions, nextBefore}` (null on the last page). */
  async versions(scope, path, before = null) {
    const params = { ...this.place.chat(), scope, path };
    if (before !== null) params.before = String(before);
    const { status, data } = await this.api.get(this.urls.noteVersions, params);
    const ok = status === 200 && data && Array.isArray(data.versions);
    return { versions: ok ? data.versions : [], nextBefore: ok ? (data.next_before ?? null) : null };
  }

  async restore(versionId) {
    const { status, data, error } = await this.api.send("POST", this.urls.noteRestore, {
      version_id: versionId,
      ...this.place.chat(),
    });
    if (status === 200) {
      this.notify(`Restored ${shortPath(data.path)}.`, "success");
      this.refresh({ focus: data.path });
    } else {
      this.notify(describeError(error), "error");
    }
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
    const line = el("p", "note-meta", `${when(version.changed_at)} · ${what} by ${who}`);
    if (version.source_message_id) {
      const id = version.source_prompt_id ?? version.source_message_id;
      line.append(" · ");
      line.append(sourceLink({ id, agent: version.source_agent, chat_id: version.source_chat_id }, "from this message"));
    }
    const text = el("p", "note-version-text", version.after ?? version.before ?? "");
    item.append(line, text);
    if (current) {
      item.append(el("span", "note-current", "current"));
    } else {
      const restore = button("Restore this version");
      // The name starts with what the button says, then says which version.
      restore.setAttribute("aria-label", `Restore this version, of ${when(version.changed_at)}`);
      restore.addEventListener("click", () => this.restore(version.id));
      item.append(restore);
    }
    return item;
  }
}
