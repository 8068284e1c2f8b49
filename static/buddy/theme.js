// The person's theme (system, light or dark), kept on the server (its preferences, README: The page):
// the server writes it on <html> as `data-color-scheme` before the first paint; this picker changes it
// at once and saves it, and puts the previous one back when the server refuses. A canvas theme the
// model sets (`data-theme`, canvas-pane.js) shows over it.

import { describeError } from "./errors.js";

/** Shows `theme` on `root`: `system` leaves light or dark to the browser. */
export function applyColorScheme(theme, root = document.documentElement) {
  if (theme === "light" || theme === "dark") root.dataset.colorScheme = theme;
  else delete root.dataset.colorScheme;
}

export class ThemePicker {
  /** `url`: the API's preferences path; `theme`: the saved choice; `notify(text, level)` shows a toast. */
  constructor({ api, url, theme, notify, select }) {
    this.api = api;
    this.url = url;
    this.notify = notify;
    this.select = select;
    this.saved = theme;
    select.value = theme;
    applyColorScheme(theme);
    select.addEventListener("change", () => this.choose(select.value));
  }

  async choose(theme) {
    applyColorScheme(theme);
    let answer;
    try {
      answer = await this.api.send("PUT", this.url, { theme });
    } catch {
      answer = null;
    }
    if (answer && !answer.error) {
      this.saved = answer.data?.theme ?? theme;
      return;
    }
    if (answer?.status === 401) return; // on the way to the login page
    this.select.value = this.saved;
    applyColorScheme(this.saved);
    this.notify(answer ? describeError(answer.error) : "Couldn't save the theme: the server could not be reached.", "error");
  }
}
