#!/usr/bin/python3
"""A git remote over HTTP with basic authentication, for the tests: git's own
`git http-backend` (the smart protocol, fetch and push) behind a password.

usage: git_http_server.py ROOT PORT USER TOKEN [--port-file FILE]

Serves the bare repositories under ROOT at http://HOST:PORT/<name>.git on every interface
(PORT 0: one the kernel picks, written to --port-file). Every request needs basic
authentication as USER with TOKEN as the password (401 otherwise), as a forge with a token
would. Python's standard library and git only."""
import base64
import http.server
import os
import subprocess
import sys


def main():
    root, port, user, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    port_file = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--port-file" else None
    expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("git_http_server: " + (fmt % args) + "\n")

        def _body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self):
            body = self._body() if self.command == "POST" else b""
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                       PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                       CONTENT_TYPE=self.headers.get("Content-Type", ""),
                       CONTENT_LENGTH=str(len(body)), REMOTE_USER=user,
                       REMOTE_ADDR=self.client_address[0], GATEWAY_INTERFACE="CGI/1.1")
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            run = subprocess.run(["git", "http-backend"], input=body, env=env,
                                 capture_output=True)
            head, _, out = run.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, out = run.stdout.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            if run.returncode != 0:
                sys.stderr.write(run.stderr.decode(errors="replace"))

        do_GET = _serve
        do_POST = _serve

    server = http.server.ThreadingHTTPServer(("", port), Handler)
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write(f"{server.server_address[1]}\n")
        os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
