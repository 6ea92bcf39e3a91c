// Module URLs as logs, errors and NACKs show them: credentials in the URL's userinfo
// (`https://user:secret@host/m.wasm`) are replaced, so a pull credential never reaches a log line,
// a metric or istiod.

/** The URL with any user:password replaced by `REDACTED`; text that is not a URL is returned as is. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, "$1REDACTED@");
}
