// Short notices in the corner: a canvas notification from the model, or the outcome of an action.

const ICONS = { info: "ℹ", success: "✓", warning: "!", error: "⚠" };

export class Toaster {
  /** `levels`: the notification levels the server's canvas tool accepts (the page config's toastLevels). */
  constructor(container, levels) {
    this.container = container;
    this.levels = levels;
  }

  show(message, level) {
    if (!message) return;
    const kind = this.levels.includes(level) ? level : "info";
    const toast = document.createElement("div");
    toast.className = `toast toast-${kind}`;
    toast.dataset.level = kind;
    const icon = document.createElement("span");
    icon.className = "toast-icon";
    icon.setAttribute("aria-hidden", "true");
    icon.textContent = ICONS[kind] ?? ICONS.info;
    const body = document.createElement("p");
    body.className = "toast-text";
    body.textContent = message;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss notification");
    close.textContent = "×";
    toast.append(icon, body, close);
    const dismiss = () => {
      toast.classList.add("is-leaving");
      setTimeout(() => toast.remove(), 200);
    };
    close.addEventListener("click", dismiss);
    this.container.append(toast);
    setTimeout(dismiss, kind === "error" ? 8000 : 5000);
  }
}
