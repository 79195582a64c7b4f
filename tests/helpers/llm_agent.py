"""An LLM agent as users write them: it asks its model (the official `openai` SDK, once plainly and
once streamed) how much to refund, then POSTs the refund. argv: BASE_URL GATE [PROMPT].

It creates GATE as soon as the streamed answer's first event arrives (the model server holds the
rest of the stream until then), and prints the model's answers."""

import json
import sys
import urllib.request
from pathlib import Path

from openai import OpenAI

base, gate = sys.argv[1], Path(sys.argv[2])
prompt = sys.argv[3] if len(sys.argv) > 3 else "Customer 42 was charged twice for order 7. What should we refund?"
client = OpenAI(base_url=base + "/v1", max_retries=0)
messages = [
    {"role": "system", "content": "You are a support agent. Answer REFUND <amount>."},
    {"role": "user", "content": prompt},
]
plain = client.chat.completions.create(model="tiny-1", messages=messages, temperature=0.2, user="agent-7")
text = plain.choices[0].message.content or ""
streamed = ""
for chunk in client.chat.completions.create(
    model="tiny-1", messages=messages, temperature=0.2, stream=True, stream_options={"include_usage": True}
):
    if chunk.choices and chunk.choices[0].delta.content:
        gate.touch()
        streamed += chunk.choices[0].delta.content
amount = int(text.split()[-1])
body = json.dumps({"customer": 42, "order": 7, "amount": amount, "checked": streamed}).encode()
req = urllib.request.Request(base + "/refund", data=body, headers={"Content-Type": "application/json"}, method="POST")
print(urllib.request.urlopen(req).read().decode())
print(json.dumps({"plain": text, "streamed": streamed}))
