// Test helper: connect to <host> <port>, print what the server answered (or "ERR <reason>").
import net from "node:net";
const [host, port] = [process.argv[2]!, Number(process.argv[3])];
let got = "";
const s = net.connect({ host, port });
const timer = setTimeout(() => {
  console.log("ERR timeout");
  process.exit(0);
}, 4000);
s.on("data", (d) => (got += d.toString()));
s.on("error", (e) => {
  console.log(`ERR ${e.message}`);
  process.exit(0);
});
s.on("close", () => {
  clearTimeout(timer);
  console.log(got.trim() || "ERR empty");
  process.exit(0);
});
