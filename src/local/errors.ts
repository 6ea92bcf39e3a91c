// Local mode's error class: what went wrong with which file (and which resource in it).

export class LocalXdsError extends Error {
  override name = "LocalXdsError";
  constructor(
    message: string,
    /** The xDS file as the user named it (LOCAL_XDS_PATH). */
    readonly path: string,
    /** `clusters[2] "foo"` when one resource is at fault. */
    readonly resource?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
