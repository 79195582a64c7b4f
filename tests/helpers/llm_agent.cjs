// An LLM agent on Node's own fetch: it asks an OpenAI-compatible model (plainly, then streamed) how much
// to refund, then POSTs the refund. argv: BASE_URL GATE. Node's fetch ignores HTTP(S)_PROXY, so the agent
// honours them the usual way, with undici's ProxyAgent as fetch's dispatcher. It creates GATE as soon as
// the streamed answer's first event arrives.
// undici is found through NODE_PATH (the tests install it with npm under .venv/node).
const { writeFileSync } = require("node:fs");
const { ProxyAgent, setGlobalDispatcher } = require("undici");

const [base, gate] = process.argv.slice(2);
const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
if (proxy) setGlobalDispatcher(new ProxyAgent(proxy));
const headers = { "Content-Type": "application/json", Authorization: `Bearer ${process.env.OPENAI_API_KEY}` };
const messages = [{ role: "system", content: "You are a support agent. Answer REFUND <amount>." },
                  { role: "user", content: "Customer 42 was charged twice for order 7. What should we refund?" }];
const ask = (extra) => fetch(`${base}/v1/chat/completions`, {
  method: "POST", headers, body: JSON.stringify({ model: "tiny-1", messages, temperature: 0.2, ...extra }) });

async function main() {
  const plain = await (await ask({})).json();
  const text = plain.choices[0].message.content;
  let streamed = "";
  const reader = (await ask({ stream: true })).body.getReader();
  const decoder = new TextDecoder();
  for (let buf = ""; ;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const data = buf.slice(0, cut).replace(/^data: /, "");
      buf = buf.slice(cut + 2);
      if (data === "[DONE]") continue;
      const delta = JSON.parse(data).choices[0]?.delta?.content;
      if (delta) { writeFileSync(gate, ""); streamed += delta; }
    }
}
const amount = Number(text.split(" ").pop());
const refund = await fetch(`${base}/refund`, { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ customer: 42, order: 7, amount, checked: streamed }) });
console.log(refund.status, JSON.stringify({ plain: text, streamed }));
}

main().catch((err) => { console.error(err); process.exit(1); });
