"""A local HTTP server that plays the Hub endpoints huggingface_hub uses to create a repo,
commit files (preupload answering "regular", then the NDJSON commit with base64 contents) and
download a snapshot (model info at a revision, HEAD + GET on resolve URLs), set a repo's visibility and a Space's
variables and secrets, so the real Hub code runs against this machine. Point HF_ENDPOINT at it. It records the
Authorization headers it saw."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}  # repo id -> file name -> content
        self.repo_types: dict[str, str] = {}  # repo id -> "model" / "space" / "dataset"
        self.variables: dict[str, dict[str, str]] = {}  # Space id -> variable -> value
        self.secrets: dict[str, dict[str, str]] = {}  # Space id -> secret -> value (the Hub never shows them back)
        self.requests: list[str] = []
        self.authorizations: list[str] = []
        self.write_token: str | None = None  # set: a write with another token is refused with 401, as the Hub does
        self.private: set[str] = set()  # repos made private by their settings (update_repo_settings)
        self.gated: set[str] = set()  # repos whose files a reader gets only with a token (their info says "auto")
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def do_PUT(self) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"PUT {path}")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if settings := re.match(r"/api/(?:models|spaces|datasets)/(.+)/settings$", path):
                    repo = settings.group(1)
                    if "private" in body:
                        (hub.private.add if body["private"] else hub.private.discard)(repo)
                    return self._send(200, b"{}", {}, True)
                self._send(404, b'{"error": "not found"}', {}, True)

            def do_POST(self) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"POST {path}")
                hub.authorizations.append(self.headers.get("Authorization", ""))
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if hub.write_token and self.headers.get("Authorization") != f"Bearer {hub.write_token}":
                    return self._send(401, b'{"error": "Invalid credentials in Authorization header"}', {}, True)
                if path == "/api/repos/create":
                    request = json.loads(body)
                    repo = f"{request['organization']}/{request['name']}" if request.get("organization") else request["name"]
                    if repo in hub.repos:  # the Hub names the existing repo, which create_repo(exist_ok=True) returns
                        return self._send(409, json.dumps({"error": "You already created this model repo",
                                                           "url": f"{hub.url}/{repo}"}).encode(), {}, True)
                    hub.repos[repo], hub.repo_types[repo] = {}, request.get("type") or "model"
                    return self._send(200, json.dumps({"url": f"{hub.url}/{repo}"}).encode(), {}, True)
                if path == "/api/validate-yaml":  # create_commit checks a README's YAML header first
                    return self._send(200, b"{}", {}, True)
                if "/preupload/" in path:
                    files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                             for f in json.loads(body)["files"]]
                    return self._send(200, json.dumps({"files": files}).encode(), {}, True)
                if secret := re.match(r"/api/spaces/(.+)/secrets$", path):
                    request = json.loads(body)
                    hub.secrets.setdefault(secret.group(1), {})[request["key"]] = request["value"]
                    return self._send(200, b"{}", {}, True)
                if path.startswith("/api/spaces/") and path.endswith("/variables"):
                    request = json.loads(body)
                    values = hub.variables.setdefault(path[len("/api/spaces/"):-len("/variables")], {})
                    values[request["key"]] = request["value"]
                    return self._send(200, json.dumps({k: {"value": v} for k, v in values.items()}).encode(), {}, True)
                if commit := re.match(r"/api/(?:models|spaces|datasets)/(.+)/commit/", path):
                    repo = commit.group(1)
                    for line in body.splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            hub.repos[repo][item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                        elif item["key"] == "deletedFile":
                            hub.repos[repo].pop(item["value"]["path"], None)
                    oid = hub.commit(repo)
                    return self._send(200, json.dumps({"commitUrl": f"{hub.url}/{repo}/commit/{oid}",
                                                       "commitOid": oid}).encode(), {}, True)
                self._send(404, b'{"error": "not found"}', {}, True)

            def _serve(self, body: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                if info := re.match(r"/api/(models|spaces|datasets)/(.+)$", path):
                    repo, _, revision = info.group(2).partition("/revision/")
                    return self._info(repo.strip("/"), info.group(1)[:-1], body)
                if "/resolve/" in path:
                    repo, _, rest = path.strip("/").partition("/resolve/")
                    _, _, filename = rest.partition("/")
                    return self._file(repo, filename, body)
                self._send(404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound"}, body)

            def _info(self, repo: str, kind: str, body: bool) -> None:
                if repo not in hub.repos or hub.repo_types.get(repo, "model") != kind:  # a Space is no model repo
                    return self._send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, body)
                info = {"id": repo, "modelId": repo, "sha": hub.commit(repo), "private": repo in hub.private,
                        "gated": "auto" if repo in hub.gated else False,
                        "siblings": [{"rfilename": name} for name in sorted(hub.repos[repo])]}
                self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)

            def _file(self, repo: str, filename: str, body: bool) -> None:
                content = hub.repos.get(repo, {}).get(filename)
                if content is None:
                    return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, body)
                etag = hashlib.sha256(content).hexdigest()
                self._send(200, content, {"ETag": f'"{etag}"', "X-Repo-Commit": hub.commit(repo),
                                          "Content-Type": "application/octet-stream"}, body)

            def _send(self, status: int, content: bytes, headers: dict, body: bool) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if body:
                    self.wfile.write(content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def commit(self, repo: str) -> str:
        digest = hashlib.sha1()
        for name, content in sorted(self.repos[repo].items()):
            digest.update(name.encode() + content)
        return digest.hexdigest()

    def run_python(self, code: str, home: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
        """Run `code` in a fresh interpreter pointed at this hub (huggingface_hub reads HF_ENDPOINT at
        import), with its own HF_HOME so no login token of this machine is seen."""
        from models.catalog import REPO_ROOT

        environment = {**os.environ, "HF_ENDPOINT": self.url, "HF_HOME": str(Path(home) / "hf"),
                       "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1", **env}
        return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                              cwd=cwd or REPO_ROOT, timeout=600)

    def add_folder(self, repo: str, folder: Path) -> None:
        self.repos[repo] = {str(p.relative_to(folder)): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
