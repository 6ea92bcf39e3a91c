// The status server's error class: bad probe configs, bad scrape annotations, failed probes.
// `input` names what was wrong (an env var, a probe path, a URL) so one line says what and where.

export class StatusError extends Error {
  override name = "StatusError";
  constructor(
    message: string,
    readonly input?: string,
    options?: ErrorOptions,
  ) {
    super(input ? `${input}: ${message}` : message, options);
  }
}
