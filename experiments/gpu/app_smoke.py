"""The app on a GPU: start `python app.py` (no background builds; the variants built by `bench-cuda`),
ask `/variants` and `/qa` of each QA variant through gradio_client, and say where each answer ran.

    python experiments/gpu/app_smoke.py RESULT.json SERVER.log
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

def main(result_path: Path, server_log: Path) -> int:
    from gradio_client import Client

    from models.showdown import SEED_CONTEXT_LONG
    from optimize.publish.report import QA_QUESTION

    env = {**os.environ, "SHOWDOWN_BUILD": "0", "GRADIO_SERVER_PORT": "7861", "GRADIO_SERVER_NAME": "127.0.0.1"}
    log = open(server_log, "w")
    server = subprocess.Popen([sys.executable, "app.py"], env=env, stdout=log, stderr=subprocess.STDOUT)
    started, client = time.monotonic(), None
    try:
        while client is None and time.monotonic() - started < 180 and server.poll() is None:
            try:
                client = Client("http://127.0.0.1:7861/", verbose=False, download_files=False)
            except Exception:
                time.sleep(1)
        if client is None:
            print("the app did not come up; see", log.name)
            return 1
        record = {"started_s": round(time.monotonic() - started, 1), "answers": {}}
        record["variants"] = [{k: v.get(k) for k in ("task", "variant", "status", "detail")}
                              for v in client.predict(api_name="/variants")]
        for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
            try:
                answer = client.predict(SEED_CONTEXT_LONG, QA_QUESTION, variant, api_name="/qa")
                record["answers"][variant] = {k: answer.get(k) for k in ("answer", "device", "latency_ms", "timing")}
            except Exception as error:
                record["answers"][variant] = {"error": f"{type(error).__name__}: {error}"}
        result_path.write_text(json.dumps(record, indent=1))
        for variant, answer in record["answers"].items():
            print(variant, json.dumps(answer))
        on_gpu = [v for v, a in record["answers"].items() if a.get("device") == "cuda"]
        print(f"answered on the GPU: {len(on_gpu)} of 4 ({', '.join(on_gpu)})")
        return 0 if len(on_gpu) == 4 else 1
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
