// The status server's error class: bad probe configs, bad scrape annotations, failed probes.
// `input` names what was wrong (an env var, a probe path, a URL) so one line says what and where.

export class StatusError extends Error {
  override name = "StatusError";
  constructor(
    message: string,
    readonly input?: string,
  ) {
    super(input ? `${input}: ${message}` : message);
  }
}

/** A readable one-line message from anything thrown. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    const msg = e.message || String(e);
    return typeof code === "string" && !msg.includes(code) ? `${msg} (${code})` : msg;
  }
  return String(e);
}
