// Which addresses from model output the page may use, and how: a link's target, a canvas media
// element's source, an image inside Markdown. Anything else is shown as text, never followed.

// The server's rule (canvas/elements.py): a path on this site starting with one "/" that no second
// "/" or "\\" follows (browsers read "\\" as "/"), with no backslash, whitespace or control character.
const SAME_SITE_PATH = /^\/(?![\/\\])[^\\\s\u0000-\u001f\u007f]*$/;
const HTTPS_URL = /^https:\/\/[^\\\s\u0000-\u001f\u007f]+$/i;
const WEB_URL = /^https?:\/\/[^\\\s\u0000-\u001f\u007f]+$/i;
const MAIL_URL = /^mailto:[^\s\u0000-\u001f\u007f/\\]+$/i;

/** Same-site paths and https addresses only (no javascript:, data: or protocol-relative URLs);
 * the page's Content-Security-Policy decides which hosts actually load. */
export function safeMediaUrl(url) {
  if (typeof url !== "string") return null;
  if (SAME_SITE_PATH.test(url) || HTTPS_URL.test(url)) return url;
  return null;
}

/** A link the page may follow: http(s), mailto or a path on this site. */
export function safeLinkUrl(url) {
  if (typeof url !== "string") return null;
  const trimmed = url.trim();
  return WEB_URL.test(trimmed) || MAIL_URL.test(trimmed) || SAME_SITE_PATH.test(trimmed) ? trimmed : null;
}

/** An image the page may load inside Markdown: a same-site path, or https from one of `mediaHosts`
 * (BUDDY_MEDIA_HOSTS, which the Content-Security-Policy allows), so no image ever asks another host. */
export function safeImageUrl(url, mediaHosts = []) {
  if (typeof url !== "string") return null;
  if (SAME_SITE_PATH.test(url)) return url;
  if (!HTTPS_URL.test(url)) return null;
  try {
    return mediaHosts.includes(new URL(url).host.toLowerCase()) ? url : null;
  } catch {
    return null;
  }
}

/** Whether `url` (one safeLinkUrl accepts) leaves this site. */
export function isExternal(url) {
  return !SAME_SITE_PATH.test(url);
}
