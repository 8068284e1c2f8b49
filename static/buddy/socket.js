// One WebSocket to the chat socket (`?agent=&chat_id=`) that reconnects by itself with exponential
// backoff and jitter. It knows nothing about frames beyond JSON: the page decides what they mean.

export function backoffDelay(attempt, { base = 500, max = 15000, random = Math.random } = {}) {
  const exponential = Math.min(max, base * 2 ** Math.max(0, attempt));
  // Full jitter on the upper half, so many tabs that lost the server together do not return in step.
  return Math.round(exponential / 2 + (random() * exponential) / 2);
}

/** The socket's address on this page's host: `path` as the page config's `urls.socket` gives it. */
export function socketUrl(location, path, { agent, chatId }) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams({ agent, chat_id: chatId });
  return `${scheme}//${location.host}${path}?${query}`;
}

export class ReconnectingSocket {
  /**
   * handlers: onFrame(frame), onOpen({reconnected}), onClose({attempt, delay}), onStatus(status, detail)
   * where status is "connecting" | "open" | "waiting" | "stopped".
   */
  constructor(urlFor, handlers) {
    this.urlFor = urlFor;
    this.handlers = handlers;
    this.socket = null;
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
    this.everOpened = false;
  }

  get isOpen() {
    return this.socket !== null && this.socket.readyState === WebSocket.OPEN;
  }

  start() {
    this.stopped = false;
    this.connectNow();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      socket.close(1000, "client closed");
    }
    this.handlers.onStatus?.("stopped");
  }

  /** Drop the current connection (if any) and open a new one now, e.g. for another chat. */
  reconnect() {
    this.attempt = 0;
    this.connectNow();
  }

  connectNow() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.socket) {
      const old = this.socket;
      this.socket = null;
      old.onclose = null;
      old.onmessage = null;
      old.close(1000, "reconnecting");
    }
    if (this.stopped) return;
    this.handlers.onStatus?.("connecting");
    let socket;
    try {
      socket = new WebSocket(this.urlFor());
    } catch (error) {
      this.scheduleRetry();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (socket !== this.socket) return;
      const reconnected = this.everOpened;
      this.everOpened = true;
      this.attempt = 0;
      this.handlers.onStatus?.("open");
      this.handlers.onOpen?.({ reconnected });
    };
    socket.onmessage = (event) => {
      if (socket !== this.socket || typeof event.data !== "string") return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return; // not ours to interpret; the server only sends JSON objects
      }
      if (frame && typeof frame === "object") this.handlers.onFrame?.(frame);
    };
    socket.onclose = (event) => {
      if (socket !== this.socket) return;
      this.socket = null;
      this.handlers.onClose?.({ code: event.code, attempt: this.attempt });
      this.scheduleRetry();
    };
  }

  scheduleRetry() {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt);
    this.attempt += 1;
    this.handlers.onStatus?.("waiting", { delay, attempt: this.attempt });
    this.timer = setTimeout(() => this.connectNow(), delay);
  }

  /** Sends one JSON frame; false when not connected (the caller keeps what the user typed). */
  send(frame) {
    if (!this.isOpen) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }
}
