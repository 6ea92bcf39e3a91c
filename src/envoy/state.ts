// The supervisor's lifecycle as an explicit state machine: one pure transition function; the
// supervisor logs every transition and acts on entering a state.
//
//   idle -start-> starting -spawned-> running -exited(restart)-> restarting -restart-due-> starting
//   running|starting|restarting -drain-> drained            (POST /drain: drain_listeners&skip_exit)
//   running|starting|drained -shutdown-> draining -drain-over-> stopping -exited(last)-> exited
//   any live state -quit | shutdown(immediate)-> stopping  (no drain)
//   any live state -exited(last, no restart)-> exited

export type SupervisorState = "idle" | "starting" | "running" | "restarting" | "drained" | "draining" | "stopping" | "exited";

export type SupervisorEvent =
  | { type: "start" }
  | { type: "spawned"; epoch: number; pid: number }
  /** An Envoy epoch ended. `last`: no other epoch is alive. `restart`: the policy allows a restart. */
  | { type: "exited"; epoch: number; last: boolean; restart: boolean; status: string }
  | { type: "restart-due" }
  | { type: "drain" }
  | { type: "shutdown"; immediate: boolean; skipDrain: boolean }
  | { type: "quit" }
  | { type: "drain-over"; why: string };

export type Transition = { ok: true; to: SupervisorState } | { ok: false; why: string };

const LIVE: readonly SupervisorState[] = ["starting", "running", "restarting", "drained", "draining", "stopping"];

export function isLive(s: SupervisorState): boolean {
  return LIVE.includes(s);
}

export function transition(from: SupervisorState, ev: SupervisorEvent): Transition {
  const to = (s: SupervisorState): Transition => ({ ok: true, to: s });
  const no = (why: string): Transition => ({ ok: false, why });
  if (from === "exited") return no("already exited");
  switch (ev.type) {
    case "start":
      return from === "idle" ? to("starting") : no("already started");
    case "spawned":
      if (from === "starting") return to("running");
      // A new epoch started while running (hot restart) or while stopping: state unchanged.
      return isLive(from) ? to(from) : no("not started");
    case "exited":
      if (!ev.last) return to(from);
      if (ev.restart && (from === "running" || from === "starting")) return to("restarting");
      return to("exited");
    case "restart-due":
      return from === "restarting" ? to("starting") : no(`no restart pending in state ${from}`);
    case "drain":
      if (from === "running" || from === "starting" || from === "restarting") return to("drained");
      return no(`cannot drain in state ${from}`);
    case "shutdown":
      if (from === "idle") return to("exited");
      if (from === "stopping") return to("stopping");
      if (ev.immediate || ev.skipDrain || from === "restarting") return to("stopping");
      if (from === "draining") return to("draining");
      return to("draining");
    case "quit":
      return from === "idle" ? to("exited") : to("stopping");
    case "drain-over":
      return from === "draining" ? to("stopping") : no(`not draining (state ${from})`);
  }
}

/** A few words for the transition log line. */
export function describeEvent(ev: SupervisorEvent): string {
  switch (ev.type) {
    case "spawned":
      return `Envoy epoch ${ev.epoch} started, pid ${ev.pid}`;
    case "exited":
      return `Envoy epoch ${ev.epoch} ended: ${ev.status}${ev.last ? "" : "; other epochs still running"}`;
    case "shutdown":
      return ev.immediate ? "shutdown requested, immediate" : ev.skipDrain ? "shutdown requested, already drained" : "shutdown requested";
    case "drain-over":
      return ev.why;
    default:
      return ev.type;
  }
}
