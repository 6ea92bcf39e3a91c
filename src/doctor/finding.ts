// What `agent doctor` reports: one finding per check and subject, printed one per line with the
// fix under a failure; the exit code says whether anything failed.

export type Status = "ok" | "warn" | "fail" | "skip";

export interface Finding {
  /** The check's name (`root-cert`, `token`, `tls istiod`...). */
  check: string;
  status: Status;
  /** What was found, naming the file, variable or address. */
  detail: string;
  /** What to do about a warning or failure. */
  fix?: string;
}

/** Exit codes: 0 nothing failed (warnings allowed), 1 at least one check failed (255: bad command line, from the CLI). */
export const DOCTOR_EXIT = { ok: 0, failed: 1 } as const;

export const ok = (check: string, detail: string): Finding => ({ check, status: "ok", detail });
export const skip = (check: string, detail: string): Finding => ({ check, status: "skip", detail });
export const warn = (check: string, detail: string, fix?: string): Finding => ({ check, status: "warn", detail, ...(fix ? { fix } : {}) });
export const fail = (check: string, detail: string, fix?: string): Finding => ({ check, status: "fail", detail, ...(fix ? { fix } : {}) });

const LABEL: Record<Status, string> = { ok: "ok", warn: "warn", fail: "FAIL", skip: "skip" };

/** The report: `LABEL  check  detail`, `fix:` lines indented under it, then a count line. */
export function formatReport(findings: readonly Finding[]): string {
  const width = Math.max(0, ...findings.map((f) => f.check.length));
  const lines: string[] = [];
  for (const f of findings) {
    lines.push(`${LABEL[f.status].padEnd(4)}  ${f.check.padEnd(width)}  ${f.detail}`);
    if (f.fix) lines.push(`${" ".repeat(6 + width)}  fix: ${f.fix}`);
  }
  const count = (s: Status) => findings.filter((f) => f.status === s).length;
  lines.push(`${count("fail")} failed, ${count("warn")} warnings, ${count("ok")} ok, ${count("skip")} skipped`);
  return lines.join("\n") + "\n";
}

export function exitCodeOf(findings: readonly Finding[]): number {
  return findings.some((f) => f.status === "fail") ? DOCTOR_EXIT.failed : DOCTOR_EXIT.ok;
}
