"""A Python HTTPS client for `reel run`'s tests: LIB URL [bypass]. GETs URL/LIB-get, then POSTs a JSON
body to URL/LIB with an Authorization and an X-Test header (requests also sends a chunked body to
URL/requests-chunked). With `bypass` it goes around the proxy (trust_env=False, an empty ProxyHandler,
no proxy for httpx) and reports what happened instead of failing."""

import json
import sys

lib, url = sys.argv[1], sys.argv[2]
bypass = sys.argv[3:] == ["bypass"]
token = f"Bearer TOKEN-{lib}-s3cr3t"
body = json.dumps({"client": lib, "n": 1}).encode()
headers = {"Authorization": token, "X-Test": lib, "Content-Type": "application/json"}


def chunks():
    yield b"part one, "
    yield b"part two"


try:
    if lib == "urllib":
        import urllib.request as u

        opener = u.build_opener(u.ProxyHandler({})) if bypass else u.build_opener()
        print("GET", opener.open(f"{url}/{lib}-get", timeout=20).read().decode())
        req = u.Request(f"{url}/{lib}", data=body, headers=headers, method="POST")
        print("POST", opener.open(req, timeout=20).status)
    elif lib == "requests":
        import requests

        s = requests.Session()
        s.trust_env = not bypass
        print("GET", s.get(f"{url}/{lib}-get", timeout=20).text)
        print("POST", s.post(f"{url}/{lib}", data=body, headers=headers, timeout=20).status_code)
        if not bypass:
            print(
                "CHUNKED",
                s.post(f"{url}/requests-chunked", data=chunks(), headers={"X-Test": "chunked"}, timeout=20).status_code,
            )
    elif lib == "httpx":
        import httpx

        with httpx.Client(trust_env=not bypass, timeout=20) as c:
            print("GET", c.get(f"{url}/{lib}-get").text)
            print("POST", c.post(f"{url}/{lib}", content=body, headers=headers).status_code)
except Exception as exc:  # noqa: BLE001
    if not bypass:
        raise
    print("BYPASS FAILED", type(exc).__name__, exc)
