"""Real git on loopback for the sync tests: bare repositories and a `git daemon` with receive-pack."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ports import Reserved

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(*args: str, cwd: Path | None = None, input: bytes | None = None) -> str:
    """Run git, fail loudly, return stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, timeout=60, env=GIT_ENV)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()}")
    return proc.stdout.decode()


def bare(path: Path) -> Path:
    git("init", "-q", "--bare", str(path))
    return path


def fsck(path: Path) -> str:
    """`git fsck --strict` on a bare repository; raises if git finds anything wrong."""
    return git("--git-dir", str(path), "fsck", "--strict", "--no-dangling")


class GitDaemon:
    """`git daemon` serving every repository under `base`, push enabled, on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.reserved = Reserved()
        """Held until `stop()`: no other process can take the port before git daemon listens on it, so
        the start probe below can only reach this daemon."""
        self.port = self.reserved.port
        self.proc: subprocess.Popen | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> GitDaemon:
        self.proc = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                f"--base-path={self.base}",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                str(self.base),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=GIT_ENV,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"git daemon exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("git daemon did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reserved.close()


class GitHttp:
    """Smart HTTP: a threaded server on 127.0.0.1 handing every request to `git http-backend` (CGI)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.truncate = False
        """When set, upload-pack answers are cut to half their length: a truncated transfer."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _cgi_handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def __enter__(self) -> GitHttp:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _cgi_handler(http: GitHttp) -> type[BaseHTTPRequestHandler]:
    base = http.base

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:
            self.backend()

        do_POST = do_GET

        def body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts = []
                for _ in range(1 << 20):
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                raise AssertionError("too many chunks")
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def backend(self) -> None:
            path, _, query = self.path.partition("?")
            env = {
                **GIT_ENV,
                "GIT_PROJECT_ROOT": str(base),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "SERVER_PROTOCOL": self.request_version,  # else http-backend answers a wrong method 400, not 405
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            data = self.body() if self.command == "POST" else b""
            env["CONTENT_LENGTH"] = str(len(data))
            proc = subprocess.run(["git", "http-backend"], input=data, capture_output=True, env=env, timeout=60)
            head, _, payload = proc.stdout.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            if http.truncate and path.endswith("/git-upload-pack"):
                payload = payload[: len(payload) // 2]
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
