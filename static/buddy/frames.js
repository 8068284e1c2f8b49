// Server frames to their handlers (README, "WebSocket frames"). A frame of a type the page does not
// know is logged once per type and otherwise ignored, so a newer server can add frames.

/**
 * A function that passes each frame to `handlers[frame.type]`; answers whether one handled it.
 * `warn` is told once about each unknown type.
 */
export function frameRouter(handlers, { warn = (message) => console.warn(message) } = {}) {
  const reported = new Set();
  return (frame) => {
    const type = frame?.type;
    if (typeof type === "string" && Object.hasOwn(handlers, type)) {
      handlers[type](frame);
      return true;
    }
    const name = typeof type === "string" ? type : JSON.stringify(type ?? null);
    if (!reported.has(name)) {
      reported.add(name);
      warn(`Buddy: ignored a frame of unknown type ${JSON.stringify(name)}; this page does not know it.`);
    }
    return false;
  };
}
