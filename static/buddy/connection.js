// The connection pill in the top bar: what the socket is doing, and "Retry now" while it waits.

const LABELS = {
  connecting: () => "Connecting…",
  open: () => "Connected",
  waiting: (detail) => `Reconnecting in ${Math.max(1, Math.round((detail.delay ?? 0) / 1000))} s…`,
  stopped: () => "Disconnected",
};

export class ConnectionStatus {
  /** dom: `pill`, `text`, `retry`; `onRetry()` when the person asks to reconnect now. */
  constructor(dom, { onRetry }) {
    this.dom = dom;
    dom.retry.addEventListener("click", () => onRetry());
  }

  /** status: "connecting" | "open" | "waiting" (detail.delay in ms) | "stopped", as socket.js reports it. */
  show(status, detail = {}) {
    this.dom.pill.dataset.status = status;
    this.dom.text.textContent = LABELS[status]?.(detail) ?? status;
    this.dom.retry.hidden = status !== "waiting";
    document.body.dataset.connection = status;
  }
}
