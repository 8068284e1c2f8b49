// Where the person is: the agent and the chat the page shows, and the archived message to open it at.
// The address (`/?agent=A&chat_id=C&around=ID`, a link to an archived message) wins over the last
// visit, which is remembered per user in localStorage.

export class Place {
  /** `agent`: {id, name, avatar} of the default agent; `chatIdPattern`: the server's chat-id rule. */
  constructor({ username, agent, chatId, chatIdPattern }) {
    this.agent = agent;
    this.chatId = chatId;
    this.aroundId = null;
    this.chatIdRule = new RegExp(chatIdPattern);
    this.storageKey = `buddy.last.${username ?? ""}`;
    this.restore();
    this.readAddress();
  }

  isChatId(value) {
    return typeof value === "string" && this.chatIdRule.test(value);
  }

  /** `{agent, chat_id}` of the chat shown, as the API's queries and bodies name it. */
  chat() {
    return { agent: this.agent.id, chat_id: this.chatId };
  }

  restore() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(this.storageKey) || "null");
      if (saved && typeof saved.agent === "string" && saved.agent) this.agent = { id: saved.agent, name: saved.agent, avatar: "" };
      if (saved && this.isChatId(saved.chatId)) this.chatId = saved.chatId;
    } catch {
      // Storage may be unavailable (private mode) or hold junk: the defaults do.
    }
  }

  readAddress() {
    const params = new URLSearchParams(window.location.search);
    const agent = params.get("agent");
    const chatId = params.get("chat_id");
    const around = Number(params.get("around"));
    if (agent) this.agent = { id: agent, name: agent, avatar: "" };
    if (chatId && this.isChatId(chatId)) this.chatId = chatId;
    if (Number.isInteger(around) && around > 0) this.aroundId = around;
    if (agent || chatId) this.save();
  }

  /** Remembers the agent and chat shown: in the address (a reload, a bookmark or a shared link opens
   * them again) and for the next visit. */
  save() {
    const url = new URL(window.location.href);
    url.searchParams.set("agent", this.agent.id);
    url.searchParams.set("chat_id", this.chatId);
    if (this.aroundId === null) url.searchParams.delete("around");
    if (url.href !== window.location.href) window.history.replaceState(null, "", url);
    try {
      window.localStorage.setItem(this.storageKey, JSON.stringify({ agent: this.agent.id, chatId: this.chatId }));
    } catch {
      // Not remembering the last chat is fine.
    }
  }

  /** Back from a linked message to the newest ones: the address no longer names the message. */
  leaveAround() {
    this.aroundId = null;
    const url = new URL(window.location.href);
    url.searchParams.delete("around");
    url.hash = "";
    window.history.replaceState(null, "", url);
  }
}
