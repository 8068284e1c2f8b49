// The chat list as a drawer on a narrow screen (beside the conversation on a wide one, where this
// does nothing): opened by the Chats button, closed by its ✕, Escape, a tap beside it or opening a
// chat, and the keyboard goes back to the button that opened it.

const NARROW = window.matchMedia("(max-width: 900px)");

export class Drawer {
  /** dom: `panel`, `openButton`, `closeButton`, `backdrop`. */
  constructor(dom) {
    this.dom = dom;
    dom.openButton.addEventListener("click", () => this.open());
    dom.closeButton.addEventListener("click", () => this.close());
    dom.backdrop.addEventListener("click", () => this.close());
    dom.panel.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.isOpen && !event.defaultPrevented) {
        event.preventDefault();
        this.close();
      }
    });
    NARROW.addEventListener("change", () => {
      if (!NARROW.matches) this.close({ returnFocus: false });
    });
  }

  get isOpen() {
    return this.dom.panel.classList.contains("is-open");
  }

  open() {
    const { panel, openButton, backdrop } = this.dom;
    panel.classList.add("is-open");
    backdrop.hidden = false;
    openButton.setAttribute("aria-expanded", "true");
    (panel.querySelector(".chat-link[aria-current]") ?? this.dom.closeButton).focus();
  }

  close({ returnFocus = true } = {}) {
    if (!this.isOpen) return;
    const { panel, openButton, backdrop } = this.dom;
    const hadFocus = panel.contains(document.activeElement);
    panel.classList.remove("is-open");
    backdrop.hidden = true;
    openButton.setAttribute("aria-expanded", "false");
    if (returnFocus && hadFocus) openButton.focus();
  }
}
