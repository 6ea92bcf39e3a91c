// Errors of the xDS proxy carry where they happened (downstream, upstream, config) so a log line
// or a gRPC status says what failed and where.

export type XdsErrorSource = "config" | "downstream" | "upstream" | "tls";

export class XdsError extends Error {
  override name = "XdsError";
  constructor(
    readonly source: XdsErrorSource,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`xds proxy ${source}: ${message}`, options);
  }
}
