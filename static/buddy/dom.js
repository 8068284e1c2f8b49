// The page's nodes (templates/index.html), found once and grouped by the part of the page that uses them.

export function collectDom() {
  const byId = (id) => document.getElementById(id);
  return {
    toasts: byId("toasts"),
    agentSelect: byId("agent"),
    searchSlot: byId("chat-search-slot"),
    themeSelect: byId("theme-choice"),
    connection: { pill: byId("connection"), text: byId("connection-text"), retry: byId("reconnect-now") },
    composer: {
      composer: byId("composer"),
      message: byId("message"),
      send: byId("send"),
      stop: byId("stop"),
      hint: byId("composer-hint"),
      tryDemo: byId("try-demo"),
    },
    log: {
      log: byId("conversation"),
      logScroll: byId("log-scroll"),
      emptyConversation: byId("conversation-empty"),
      emptyAgentName: byId("conversation-empty-agent"),
    },
    history: { logScroll: byId("log-scroll"), loadEarlier: byId("load-earlier"), backToLatest: byId("back-to-latest") },
    chats: {
      list: byId("chat-list"),
      newChat: byId("new-chat"),
      dialog: byId("delete-chat-dialog"),
      dialogText: byId("delete-chat-text"),
      current: byId("chat-current"),
    },
    drawer: {
      panel: byId("chat-list-panel"),
      openButton: byId("open-chats"),
      closeButton: byId("close-chats"),
      backdrop: byId("chat-list-backdrop"),
    },
    canvas: {
      canvas: byId("canvas"),
      canvasCount: byId("canvas-count"),
      canvasPanel: byId("canvas-panel"),
      canvasScroll: byId("canvas-scroll"),
      canvasPointer: byId("canvas-pointer"),
      canvasPointerText: byId("canvas-pointer-text"),
    },
    memory: {
      panel: byId("memory-panel"),
      canvasPanel: byId("canvas-panel"),
      chatList: byId("memory-chat"),
      profileList: byId("memory-profile"),
      count: byId("memory-count"),
      showMemory: byId("show-memory"),
      showCanvas: byId("show-canvas"),
    },
  };
}
