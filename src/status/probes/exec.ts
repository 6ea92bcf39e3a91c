// Exec probe (VM health checks only): the command exits 0 within the timeout.

import { errorMessage } from "../../lib/errors.ts";

export interface ExecProbeRequest {
  command: string[];
  timeoutMs: number;
}

/** undefined when the command exited 0, else its exit status and (trimmed) output. */
export async function execProbe(req: ExecProbeRequest): Promise<string | undefined> {
  if (req.command.length === 0) return "exec probe has an empty command";
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn(req.command, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  } catch (e) {
    return `exec ${req.command[0]}: ${errorMessage(e)}`;
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, req.timeoutMs);
  const [code, out, err] = await Promise.all([
    proc.exited,
    new Response(proc.stdout as ReadableStream).text(),
    new Response(proc.stderr as ReadableStream).text(),
  ]);
  clearTimeout(timer);
  if (timedOut) return `command ${JSON.stringify(req.command.join(" "))} timed out after ${req.timeoutMs}ms`;
  if (code === 0) return undefined;
  const output = (out + err).trim().slice(0, 512);
  return `command ${JSON.stringify(req.command.join(" "))} exited with ${code}${output ? `: ${output}` : ""}`;
}
