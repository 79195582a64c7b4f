// Node (no built-in proxy support): GET and POST through HTTPS_PROXY with a CONNECT tunnel, trusting
// NODE_EXTRA_CA_CERTS; with "bypass", Node's fetch goes straight to the URL, ignoring the proxy.
const http = require("http"), https = require("https"), tls = require("tls");
const [url, mode] = process.argv.slice(2);
const u = new URL(url);

function tunnel(method, path, body, headers) {
  const proxy = new URL(process.env.HTTPS_PROXY);
  return new Promise((resolve, reject) => {
    const c = http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: `${u.hostname}:${u.port}`});
    c.on("error", reject);
    c.on("connect", (res, socket) => {
      const r = https.request({host: u.hostname, port: u.port, path, method, headers,
                               createConnection: () => tls.connect({socket, host: u.hostname})}, (resp) => {
        let data = "";
        resp.on("data", (d) => (data += d));
        resp.on("end", () => resolve([resp.statusCode, data]));
      });
      r.on("error", reject);
      r.end(body);
    });
    c.end();
  });
}

(async () => {
  if (mode === "bypass") {
    try {
      const r = await fetch(`${url}/node-fetch`, {method: "POST", body: "escape"});
      console.log("BYPASS REACHED", r.status);
    } catch (e) {
      console.log("BYPASS FAILED", e.cause ? e.cause.code || e.cause.message : e.message);
    }
    return;
  }
  const got = await tunnel("GET", "/node-get", undefined, {});
  console.log("GET", got[0], got[1]);
  const body = JSON.stringify({client: "node", n: 1});
  const sent = await tunnel("POST", "/node", body, {"Authorization": "Bearer TOKEN-node-s3cr3t", "X-Test": "node",
                                                    "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body)});
  console.log("POST", sent[0]);
})().catch((e) => { console.error(e); process.exit(1); });
