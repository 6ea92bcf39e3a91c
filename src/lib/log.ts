// Istio-compatible scoped logging.
//
// Text format (Istio's pkg/log): `<RFC3339 UTC, microseconds>\t<level>\t[<scope>\t]<message>`; the
// scope column is omitted for the `default` scope. JSON format: one object per line with
// `time`, `level`, `scope` (left out for the `default` scope, as Istio's), `msg` and any fields.
//
// Levels are per scope (`--log_output_level=default:info,xdsproxy:debug`; `all:<level>` or a bare
// level applies to every scope). Nothing here knows about secrets: callers redact before logging
// (see `redact` in config/redact.ts). No module-level mutable state: a `LogSink` is created by the
// entry point and passed down; `Logger`s are cheap views onto it.

export const LEVELS = ["debug", "info", "warn", "error", "fatal", "none"] as const;
export type Level = (typeof LEVELS)[number];
const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3, fatal: 4, none: 5 };

export class LogConfigError extends Error {
  override name = "LogConfigError";
}

export interface LogOptions {
  /** `--log_output_level`, e.g. `default:info,grpc:none`. */
  outputLevels?: string;
  /** `--log_as_json`. */
  json?: boolean;
  /** `--log_caller`: comma list of scopes whose lines carry the call site. */
  callerScopes?: string;
  /** `--log_stacktrace_level`, e.g. `default:none`. */
  stacktraceLevels?: string;
  /** Where lines go; `stdout`/`stderr` or a file path (`--log_target`). */
  write?: (line: string) => void;
  /** Clock for timestamps (tests inject a fixed one). */
  now?: () => Date;
}

export type Fields = Record<string, unknown>;

/** Marks fields that only the JSON format carries. */
const JSON_ONLY = Symbol("json-only fields");

/**
 * Identifiers the message already names (pid, path, type_url, stream id, file): keys of their own
 * under `--log_as_json`, so a log pipeline can filter on them, and left out of the text line,
 * which stays Istio's word for word. Fields not wrapped in `ids` are rendered in both formats.
 */
export function ids(fields: Fields): Fields {
  return Object.defineProperty({ ...fields }, JSON_ONLY, { value: true, enumerable: false });
}

/** Parse `scope:level,scope:level` (bare level = default scope; `all:` = every scope). */
export function parseScopedLevels(spec: string, flag = "--log_output_level"): Map<string, Level> {
  const out = new Map<string, Level>();
  for (const raw of spec.split(",")) {
    const item = raw.trim();
    if (!item) continue;
    const parts = item.split(":");
    if (parts.length > 2) throw new LogConfigError(`${flag}: invalid scope:level pair "${item}"`);
    const [scope, level] = parts.length === 1 ? ["default", parts[0]!] : [parts[0]!, parts[1]!];
    const lv = level.toLowerCase() === "warning" ? "warn" : level.toLowerCase();
    if (!(LEVELS as readonly string[]).includes(lv)) {
      throw new LogConfigError(`${flag}: invalid log level "${level}" for scope "${scope}" (want one of ${LEVELS.join(", ")})`);
    }
    out.set(scope, lv as Level);
  }
  return out;
}

/** Istio timestamp: RFC3339 UTC with microseconds, e.g. 2024-01-02T03:04:05.123456Z. */
export function formatTimestamp(d: Date): string {
  const iso = d.toISOString(); // 2024-01-02T03:04:05.123Z
  return `${iso.slice(0, 23)}000Z`;
}

function formatValue(v: unknown): string {
  if (typeof v === "string") return v;
  if (v instanceof Error) return v.message;
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** One scope's level changed at run time (POST /logging). */
export interface LevelChange {
  scope: string;
  from: Level;
  to: Level;
}

export class LogSink {
  private readonly levels: Map<string, Level>;
  /** Every scope a logger was made for: the names GET /logging lists. */
  private readonly scopes = new Set<string>(["default"]);
  private readonly json: boolean;
  private readonly callers: Set<string>;
  private readonly write: (line: string) => void;
  private readonly now: () => Date;

  constructor(opts: LogOptions = {}) {
    this.levels = parseScopedLevels(opts.outputLevels ?? "default:info,grpc:none");
    for (const scope of this.levels.keys()) if (scope !== "all") this.scopes.add(scope);
    this.json = opts.json ?? false;
    this.callers = new Set(
      (opts.callerScopes ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    );
    this.write = opts.write ?? ((line) => process.stdout.write(line + "\n"));
    this.now = opts.now ?? (() => new Date());
  }

  levelOf(scope: string): Level {
    return this.levels.get(scope) ?? this.levels.get("all") ?? this.levels.get("default") ?? "info";
  }

  /** Every known scope with its level now, sorted by name. */
  scopeLevels(): Record<string, Level> {
    const out: Record<string, Level> = {};
    for (const scope of [...this.scopes].sort()) out[scope] = this.levelOf(scope);
    return out;
  }

  /**
   * Set levels at run time, in `--log_output_level`'s syntax (`all:` sets every scope, a bare
   * level the default scope). Every named scope must be known (a typo would otherwise change
   * nothing); nothing is applied when any item is refused. Returns what changed.
   */
  setLevels(spec: string, flag = "level"): LevelChange[] {
    const wanted = parseScopedLevels(spec, flag);
    if (wanted.size === 0) throw new LogConfigError(`${flag}: no scope:level pair given`);
    const unknown = [...wanted.keys()].filter((s) => s !== "all" && !this.scopes.has(s));
    if (unknown.length > 0) {
      throw new LogConfigError(`${flag}: unknown scope ${unknown.map((u) => `"${u}"`).join(", ")} (known scopes: ${[...this.scopes].sort().join(", ")})`);
    }
    const before = this.scopeLevels();
    const all = wanted.get("all");
    if (all !== undefined) {
      this.levels.clear();
      this.levels.set("all", all);
    }
    for (const [scope, level] of wanted) if (scope !== "all") this.levels.set(scope, level);
    const after = this.scopeLevels();
    return Object.keys(after)
      .filter((scope) => before[scope] !== after[scope])
      .map((scope) => ({ scope, from: before[scope]!, to: after[scope]! }));
  }

  enabled(scope: string, level: Level): boolean {
    return level !== "none" && RANK[level] >= RANK[this.levelOf(scope)];
  }

  emit(scope: string, level: Level, msg: string, fields?: Fields): void {
    if (!this.enabled(scope, level)) return;
    const ts = formatTimestamp(this.now());
    const caller = this.callers.has(scope) || this.callers.has("all") ? callSite() : undefined;
    if (this.json) {
      // Istio's pkg/log gives the default scope no logger name, so its JSON carries no "scope".
      const obj: Record<string, unknown> = scope === "default" ? { level, time: ts, msg } : { level, time: ts, scope, msg };
      if (caller) obj.caller = caller;
      if (fields) for (const [k, v] of Object.entries(fields)) obj[k] = v instanceof Error ? v.message : v;
      this.write(JSON.stringify(obj));
      return;
    }
    let line = `${ts}\t${level}\t`;
    if (scope !== "default") line += `${scope}\t`;
    if (caller) line += `${caller}\t`;
    line += msg;
    if (fields && !(JSON_ONLY in fields)) {
      for (const [k, v] of Object.entries(fields)) line += `\t${k}=${formatValue(v)}`;
    }
    this.write(line);
  }

  logger(scope = "default"): Logger {
    this.scopes.add(scope);
    return new Logger(this, scope);
  }
}

function callSite(): string | undefined {
  const stack = new Error().stack?.split("\n") ?? [];
  // [0] "Error", [1] callSite, [2] emit, [3] Logger.<level>, [4] the caller
  const frame = stack[4]?.trim();
  const m = frame?.match(/\(?([^()\s]+:\d+):\d+\)?$/);
  return m ? m[1]!.split("/").slice(-2).join("/") : undefined;
}

export class Logger {
  constructor(
    private readonly sink: LogSink,
    readonly scope: string,
  ) {}
  debug(msg: string, fields?: Fields): void {
    this.sink.emit(this.scope, "debug", msg, fields);
  }
  info(msg: string, fields?: Fields): void {
    this.sink.emit(this.scope, "info", msg, fields);
  }
  warn(msg: string, fields?: Fields): void {
    this.sink.emit(this.scope, "warn", msg, fields);
  }
  error(msg: string, fields?: Fields): void {
    this.sink.emit(this.scope, "error", msg, fields);
  }
  fatal(msg: string, fields?: Fields): void {
    this.sink.emit(this.scope, "fatal", msg, fields);
  }
  debugEnabled(): boolean {
    return this.sink.enabled(this.scope, "debug");
  }
  /** A logger for another scope on the same sink. */
  child(scope: string): Logger {
    return this.sink.logger(scope);
  }
}

/** A logger that records lines in memory; for tests. */
export function memoryLogger(outputLevels = "all:debug"): { sink: LogSink; lines: string[]; log: Logger } {
  const lines: string[] = [];
  const sink = new LogSink({ outputLevels, write: (l) => lines.push(l) });
  return { sink, lines, log: sink.logger() };
}

/** A logger that drops everything. */
export function silentLogger(): Logger {
  return new LogSink({ outputLevels: "all:none", write: () => {} }).logger();
}
