// The envoy subsystem's error class: every failure names what was being done and to what
// (binary path, admin URL, file), so one log line is enough to act on it.

export class EnvoyError extends Error {
  override name = "EnvoyError";
  constructor(
    message: string,
    /** What the supervisor was doing: `spawn`, `drain_listeners`, `stats`, `config-yaml`, ... */
    readonly op: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
