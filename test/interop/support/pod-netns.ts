// A pod's network namespace, as the container runtime's sandbox gives one: loopback up and the
// pod IP on an interface (a veth pair, both ends inside). Every process of the pod (the agents,
// the init containers, hooks and probes) runs in it through nsenter, so the ports the rendered
// pod names (15000, 15020, 15021, 15053, the app's) are the pod's own and pods run side by side.
// Needs root, unshare, nsenter and ip.

export interface PodNetns {
  /** Command prefix that runs a program in the namespace. */
  prefix: string[];
  close(): Promise<void>;
}

export async function startPodNetns(podIP: string): Promise<PodNetns> {
  const v6 = podIP.includes(":");
  const addr = v6 ? `ip -6 addr add ${podIP}/64 dev v0 nodad` : `ip addr add ${podIP}/24 dev v0`;
  const p = Bun.spawn(
    [
      "unshare",
      "--net",
      "--",
      "sh",
      "-c",
      `ip link set lo up && ip link add v0 type veth peer name v1 && ${addr} && ip link set v0 up && ip link set v1 up && echo up && exec sleep 3600`,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  // No time bound of its own: creating a network namespace waits on the kernel's namespace
  // teardown of earlier pods (serialized), seconds on a loaded machine (a 10 s race failed once at
  // load 14). A namespace that never comes up ends the shell (its output closes) or the test's timeout.
  const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
  const first = await reader.read();
  reader.releaseLock();
  if (first.done || !new TextDecoder().decode(first.value).includes("up")) {
    p.kill("SIGKILL");
    throw new Error(`pod network namespace for ${podIP} did not come up: ${await new Response(p.stderr).text()}`);
  }
  return {
    prefix: ["nsenter", `--net=/proc/${p.pid}/ns/net`, "--"],
    async close() {
      p.kill("SIGKILL");
      await p.exited;
    },
  };
}
