"""The LLM agent of llm_agent.py on the official `anthropic` SDK: one plain and one streamed Messages
call, then the refund POST. argv: BASE_URL GATE (created when the stream's first text arrives)."""

import json
import sys
import urllib.request
from pathlib import Path

from anthropic import Anthropic

base, gate = sys.argv[1], Path(sys.argv[2])
client = Anthropic(base_url=base, max_retries=0)
messages = [{"role": "user", "content": "Customer 42 was charged twice for order 7. What should we refund?"}]
plain = client.messages.create(model="tiny-a", max_tokens=64, system="Answer REFUND <amount>.", messages=messages)
text = plain.content[0].text
streamed = ""
with client.messages.stream(
    model="tiny-a", max_tokens=64, system="Answer REFUND <amount>.", messages=messages
) as stream:
    for piece in stream.text_stream:
        gate.touch()
        streamed += piece
body = json.dumps({"customer": 42, "order": 7, "amount": int(text.split()[-1]), "checked": streamed}).encode()
req = urllib.request.Request(base + "/refund", data=body, headers={"Content-Type": "application/json"}, method="POST")
print(urllib.request.urlopen(req).read().decode())
