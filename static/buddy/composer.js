// The message box and its buttons: Enter sends (Shift+Enter adds a line), Stop asks the server to
// end the running turn, a hint line for short warnings, and the offline demo's "Try the canvas".

const DEMO_PROMPT = `CANVAS: ${JSON.stringify([
  { name: "canvas_add_card", input: { id: "welcome", title: "Hello from the canvas", body: "Cards, **charts**, tables and more appear here." } },
  {
    name: "canvas_show_chart",
    input: {
      id: "visitors",
      title: "Visitors this week",
      chart_type: "bar",
      labels: ["Mon", "Tue", "Wed", "Thu", "Fri"],
      series: [{ name: "Visitors", values: [120, 180, 150, 210, 240] }],
    },
  },
])}`;

export class Composer {
  /**
   * `onSend(text)` with the trimmed text when the person sends and no reply is being written;
   * `onStop()` answers whether the stop request went out.
   * dom: `composer`, `message`, `send`, `stop`, `hint`, `tryDemo` (absent unless offline).
   */
  constructor({ onSend, onStop, dom }) {
    this.onSend = onSend;
    this.dom = dom;
    this.running = false;
    this.hintTimer = null;
    const { composer, message, stop, tryDemo } = dom;
    composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    message.addEventListener("keydown", (event) => {
      // Enter sends, Shift+Enter adds a line; never while an input method is composing a character.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        this.submit();
      }
    });
    message.addEventListener("input", () => this.autosize());
    stop.addEventListener("click", () => {
      if (this.running && onStop()) this.showStopping();
    });
    tryDemo?.addEventListener("click", () => {
      message.value = DEMO_PROMPT;
      this.autosize();
      message.focus();
    });
  }

  submit() {
    const text = this.dom.message.value.trim();
    if (!text) return;
    if (this.running) {
      this.flashHint("A reply is still being written — wait for it, or press Stop.");
      return;
    }
    this.onSend(text);
  }

  /** A reply is being written: Stop instead of Send. */
  setRunning(running) {
    this.running = running;
    const { stop, send, composer } = this.dom;
    stop.hidden = !running;
    stop.disabled = false;
    stop.textContent = "Stop";
    send.disabled = running;
    composer.dataset.running = running ? "true" : "false";
  }

  showStopping() {
    this.dom.stop.disabled = true;
    this.dom.stop.textContent = "Stopping…";
  }

  clear() {
    this.dom.message.value = "";
    this.autosize();
  }

  /** Gives back the text of a prompt the server refused, unless the person typed something new. */
  restore(text) {
    if (this.dom.message.value) return;
    this.dom.message.value = text;
    this.autosize();
  }

  focus() {
    this.dom.message.focus();
  }

  setAgentName(name) {
    this.dom.message.placeholder = `Message ${name}…`;
  }

  flashHint(text) {
    const { hint } = this.dom;
    hint.textContent = text;
    hint.classList.add("is-warning");
    clearTimeout(this.hintTimer);
    this.hintTimer = setTimeout(() => {
      hint.textContent = hint.dataset.default;
      hint.classList.remove("is-warning");
    }, 4000);
  }

  autosize() {
    const box = this.dom.message;
    box.style.height = "auto";
    box.style.height = `${Math.min(box.scrollHeight + 2, 220)}px`;
  }
}
