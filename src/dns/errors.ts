// Errors of the DNS proxy: what failed (name table, resolv.conf, listen address, upstream) and where.

export type DnsErrorKind = "nametable" | "resolvconf" | "listen" | "config";

export class DnsError extends Error {
  override name = "DnsError";
  constructor(
    readonly kind: DnsErrorKind,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
