// Errors of the SDS side: which resource, which file, what was wrong. Never carries key bytes.

export class SdsError extends Error {
  override name = "SdsError";
  constructor(
    message: string,
    /** The SDS resource name concerned, when there is one. */
    readonly resource?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
