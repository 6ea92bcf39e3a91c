// Test helper: a UDP DNS responder on <port> [bind address] answering every A question with <ip>.
// The agent's DNS proxy listens on localhost:15053, so replies to redirected queries leave from
// 127.0.0.1 and match the NAT entry.
import dgram from "node:dgram";
const [port, ip, bindAddress] = [Number(process.argv[2]), process.argv[3]!, process.argv[4] ?? "0.0.0.0"];
const sock = dgram.createSocket("udp4");
sock.on("message", (q, rinfo) => {
  let off = 12;
  while (q[off]! !== 0) off += q[off]! + 1;
  const question = q.subarray(12, off + 5);
  const header = Buffer.from([q[0]!, q[1]!, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
  const answer = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, ...ip.split(".").map(Number)]);
  sock.send(Buffer.concat([header, question, answer]), rinfo.port, rinfo.address);
  console.log(JSON.stringify({ from: `${rinfo.address}:${rinfo.port}` }));
});
sock.on("error", (e) => console.log(JSON.stringify({ error: e.message })));
sock.bind(port, bindAddress, () => console.log("ready"));
