"""The showdown on Ray Serve (issue 54): a real local Ray cluster, two model replicas behind the
app's own UI and API, on the tiny built presets."""
import os

import pytest

ray = pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-ray.txt")


@pytest.fixture(scope="module")
def ray_url(built_presets, isolated_artifacts):
    import socket

    from ray import serve

    from ray_app import ServeConfig, start

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        ray.init(include_dashboard=False)
    except Exception as error:  # noqa: BLE001 - a machine where Ray cannot start a cluster
        if os.environ.get("CI"):  # CI installs Ray: a cluster that cannot start there is a broken feature, not a skip
            raise
        pytest.skip(f"Ray could not start a local cluster here: {type(error).__name__}: {error}")
    url = start(ServeConfig(replicas=2, cpus_per_replica=0.5, host="127.0.0.1", port=port),
                presets=dict(built_presets), env={"SHOWDOWN_ARTIFACTS": str(isolated_artifacts)})
    yield url
    serve.shutdown()
    ray.shutdown()


@pytest.fixture(scope="module")
def client(ray_url):
    from gradio_client import Client

    return Client(ray_url, verbose=False)


def test_both_tasks_answer_through_the_apps_api_from_two_replicas(client):
    variants = client.predict(api_name="/variants")
    assert {(v["task"], v["variant"]) for v in variants if v["status"] == "ready"} >= {("qa", "baseline"), ("generation", "optimized")}
    replicas = set()
    for _ in range(12):
        result = client.predict("The second pig worked harder.", "Who worked harder?", "optimized", api_name="/qa")
        assert result["latency_ms"]["model"] > 0 and result["latency_ms"]["queue"] >= 0 and result["latency_ms"]["wait"] >= 0
        replicas.add(result["replica"])
    assert len(replicas) == 2, replicas  # Ray spread the requests over both replicas
    generated = client.predict("Say hello", "optimized", 4, api_name="/generate")
    assert generated["new_tokens"] == 4 and generated["replica"] and generated["decode_tokens_per_s"] > 0
    compared = client.predict("The second pig worked harder.", "Who worked harder?", ["baseline", "optimized"],
                              api_name="/compare_qa")
    assert all(r["timing"].startswith("as the median of 3 calls") for r in compared.values()), compared


def test_a_bad_input_is_a_message_from_the_replica_not_a_trace(client):
    with pytest.raises(Exception, match="Please enter a question") as raised:
        client.predict("The second pig worked harder.", "  ", "baseline", api_name="/qa")
    assert "Traceback" not in str(raised.value) and "ray::" not in str(raised.value)
    assert client.predict("The pig.", "Who?", "baseline", api_name="/qa")["replica"]


def test_the_ingress_rotates_the_run_order_as_the_showdown_does():
    """The UI's generation click asks the ingress for the order (ui/tasks.py): the same rotation as Showdown's."""
    from ray_app import RemoteShowdown

    ingress = RemoteShowdown(replicas=None, presets={})
    firsts = [ingress.run_order(["baseline", "optimized", "pruned"])[0] for _ in range(3)]
    assert sorted(firsts) == ["baseline", "optimized", "pruned"]


def test_a_replica_count_no_cluster_can_serve_is_one_line(monkeypatch, capsys):
    """`python ray_app.py --replicas 0` ended in a ValueError trace; it is now argparse's one line, exit status 2."""
    import sys

    import ray_app

    monkeypatch.setattr(sys, "argv", ["ray_app.py", "--replicas", "0"])
    with pytest.raises(SystemExit) as stopped:
        ray_app.main()
    assert stopped.value.code == 2
    assert "error: replicas and max queued per replica must be ≥ 1" in capsys.readouterr().err
    for flags, message in ((["--cpus-per-replica", "nan"], "CPUs per replica > 0"), (["--port", "99999"], "--port 99999")):
        monkeypatch.setattr(sys, "argv", ["ray_app.py", *flags])  # had crashed after the cluster started
        with pytest.raises(SystemExit) as stopped:
            ray_app.main()
        assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_the_page_s_buttons_answer_through_the_replicas(ray_url, request):
    """The QA and generation buttons ran the models, then failed: the tabs name the model they ran
    (`showdown.preset`), which the ingress's stand-in for a Showdown lacked. A real browser clicks both."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from tests.test_browser import journaled

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = journaled(request, browser.new_page(viewport={"width": 1400, "height": 1000}))
        page.goto(ray_url)
        page.get_by_role("button", name="Answer with every variant").click()
        page.wait_for_function("() => document.querySelector('#qa-run-table textarea').value.includes('| baseline |')",
                               timeout=120_000)
        page.get_by_role("tab", name="Text generation").click()
        page.get_by_role("button", name="Generate with every variant").click()
        page.wait_for_function("() => document.querySelector('#generation-run-table textarea').value.includes('| optimized |')",
                               timeout=120_000)
        browser.close()


def test_a_replica_serves_the_other_variants_when_one_fails_to_load(built_presets, monkeypatch):
    """One variant that failed to load raised out of the replica's constructor, and Serve retried it for ever:
    nothing was served. app.py shows that variant unavailable and serves the rest; a replica now does the same."""
    import types

    import models.showdown as showdown_module
    import ray_app

    real_load = showdown_module.load_runner

    def load_runner(task, variant, *args):
        if (task, variant) == ("qa", "optimized"):
            raise RuntimeError("this variant's session cannot be created here")
        return real_load(task, variant, *args)
    monkeypatch.setattr(showdown_module, "load_runner", load_runner)
    monkeypatch.setattr(ray_app.serve, "get_replica_context",
                        lambda: types.SimpleNamespace(replica_id=types.SimpleNamespace(unique_id="probe")))
    replica = ray_app.ModelReplica(dict(built_presets))
    assert replica.showdown.variant_status("qa", "optimized")["status"] == "unavailable"
    assert replica.showdown.answer("The pig built a house of straw.", "What did the pig build?", "baseline")["answer"]


def test_a_generation_click_runs_every_variant_on_one_replica(ray_url, built_presets):
    """Each variant's stream was its own request, so one click's baseline and optimized ran on different replicas
    (on a cluster, different machines) and its speedups compared them; QA's compare already stayed on one."""
    from ray import serve

    from models.errors import InputError
    from models.generation import Update
    from ray_app import RemoteShowdown

    remote = RemoteShowdown(serve.get_deployment_handle("ModelReplica", app_name="showdown"), dict(built_presets))
    for _ in range(4):
        replicas, refused = {}, []
        for variant, update in remote.stream_each("Say hello", ["baseline", "pruned", "optimized"], 4):
            if isinstance(update, Update) and update.done:
                replicas[variant] = update.result["replica"]
            elif isinstance(update, Exception):
                refused.append((variant, type(update)))
        assert set(replicas) == {"baseline", "optimized"} and len(set(replicas.values())) == 1, replicas
        assert len(refused) == 1 and refused[0][0] == "pruned" and issubclass(refused[0][1], InputError), refused
