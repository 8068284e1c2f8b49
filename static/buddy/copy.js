// A "Copy" button: puts a text on the clipboard (the Clipboard API; where the page may not use it —
// no permission, an insecure origin — a hidden text area and the editing command), then says "Copied"
// for a moment. Its accessible name says what it copies ("Copy code", "Copy message").

const SAID_FOR_MS = 1600;

function copyWithSelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "copy-buffer";
  const focused = document.activeElement;
  document.body.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  }
  area.remove();
  if (focused instanceof HTMLElement) focused.focus({ preventScroll: true });
  return copied;
}

/** Copies `text`; resolves to whether it reached the clipboard. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, the document not focused): the older way may still work.
    }
  }
  return copyWithSelection(text);
}

/**
 * A button copying what `getText()` answers when pressed. `what` names it for a screen reader
 * ("code" makes "Copy code"); the visible label is "Copy", then "Copied" or "Copy failed".
 */
export function copyButton(what, getText, className = "copy-button") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = className;
  const idle = () => {
    button.textContent = "Copy";
    button.setAttribute("aria-label", `Copy ${what}`);
    delete button.dataset.state;
  };
  idle();
  let timer = null;
  button.addEventListener("click", async () => {
    const copied = await copyText(getText());
    button.textContent = copied ? "Copied" : "Copy failed";
    button.setAttribute("aria-label", copied ? `Copied ${what}` : `Copy failed: ${what}`);
    button.dataset.state = copied ? "copied" : "failed";
    clearTimeout(timer);
    timer = setTimeout(idle, SAID_FOR_MS);
  });
  return button;
}
