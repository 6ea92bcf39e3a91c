// One way to turn anything thrown into a line of text. `catch (e)` gives `unknown`: an Error, but
// also a string, a gRPC status object, a DOMException or null from code we do not own, so callers
// do not cast (`(e as Error).message` prints "undefined" for a string and throws on null).

/** A readable one-line message from anything thrown; a system error's code is added when missing. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    const msg = e.message || String(e);
    return typeof code === "string" && !msg.includes(code) ? `${msg} (${code})` : msg;
  }
  if (typeof e === "string") return e;
  if (e !== null && typeof e === "object") {
    const msg = (e as { message?: unknown }).message;
    if (typeof msg === "string" && msg !== "") return msg;
    try {
      return JSON.stringify(e) ?? String(e);
    } catch {
      return String(e);
    }
  }
  return String(e);
}
