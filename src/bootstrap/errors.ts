// Errors of the bootstrap subsystem: what failed and which input (file, option, address) caused it.

export class BootstrapError extends Error {
  override name = "BootstrapError";
  constructor(
    message: string,
    /** The input at fault: a template path, an option name, an env var. */
    readonly input?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
