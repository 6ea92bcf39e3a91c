import { expect, test } from "bun:test";
import { transition, type SupervisorEvent, type SupervisorState } from "../../src/envoy/state.ts";

const exitedLast = (restart: boolean): SupervisorEvent => ({ type: "exited", epoch: 0, last: true, restart, status: "exit code 1" });
const shutdown = (immediate = false, skipDrain = false): SupervisorEvent => ({ type: "shutdown", immediate, skipDrain });

test("transition table", () => {
  const cases: [SupervisorState, SupervisorEvent, SupervisorState | null][] = [
    ["idle", { type: "start" }, "starting"],
    ["starting", { type: "start" }, null],
    ["starting", { type: "spawned", epoch: 0, pid: 1 }, "running"],
    ["running", { type: "spawned", epoch: 1, pid: 2 }, "running"],
    ["running", exitedLast(true), "restarting"],
    ["starting", exitedLast(true), "restarting"],
    ["running", exitedLast(false), "exited"],
    ["running", { type: "exited", epoch: 0, last: false, restart: false, status: "" }, "running"],
    ["restarting", { type: "restart-due" }, "starting"],
    ["running", { type: "restart-due" }, null],
    ["running", { type: "drain" }, "drained"],
    ["restarting", { type: "drain" }, "drained"],
    ["draining", { type: "drain" }, null],
    ["running", shutdown(), "draining"],
    ["running", shutdown(true), "stopping"],
    ["running", shutdown(false, true), "stopping"],
    ["drained", shutdown(), "draining"],
    ["drained", shutdown(false, true), "stopping"],
    ["restarting", shutdown(), "stopping"],
    ["draining", shutdown(), "draining"],
    ["draining", shutdown(true), "stopping"],
    ["idle", shutdown(), "exited"],
    ["running", { type: "quit" }, "stopping"],
    ["draining", { type: "quit" }, "stopping"],
    ["draining", { type: "drain-over", why: "x" }, "stopping"],
    ["stopping", { type: "drain-over", why: "x" }, null],
    ["draining", exitedLast(true), "exited"],
    ["stopping", exitedLast(true), "exited"],
    ["drained", exitedLast(true), "exited"],
    ["exited", { type: "start" }, null],
    ["exited", shutdown(true), null],
  ];
  for (const [from, ev, want] of cases) {
    const t = transition(from, ev);
    expect({ from, ev: ev.type, to: t.ok ? t.to : null }).toEqual({ from, ev: ev.type, to: want });
  }
});
