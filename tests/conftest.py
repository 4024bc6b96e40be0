"""Shared fixtures. Tests run offline on the CPU: ``HF_HUB_OFFLINE=1`` and a private cache."""
import os
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "DOMINOTREE_CACHE" not in os.environ:
    os.environ["DOMINOTREE_CACHE"] = tempfile.mkdtemp(prefix="dominotree-test-cache-")
    # The C++ kernels' folder is named by a hash of their sources, flags and torch version
    # (models/cpuext.py), so one build serves every test run on this machine: the private cache
    # links kernels/ to a shared folder instead of compiling ~20 s per run. Everything else
    # (the SmolLM2 conversion: once per run, datasets, calibrations) stays private to the run.
    _kernels = Path(tempfile.gettempdir()) / f"dominotree-test-kernels-{os.getuid()}"
    _kernels.mkdir(exist_ok=True)
    (Path(os.environ["DOMINOTREE_CACHE"]) / "kernels").symlink_to(_kernels, target_is_directory=True)

import pytest  # noqa: E402
import torch  # noqa: E402

# Tiny test models are overhead-bound: one thread is fastest, and it keeps a busy CI machine
# (or a background job) from stalling OpenMP spin-waits.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_pair():
    from dominotree.presets import load_pair
    return load_pair("random-tiny", dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def tiny_decoder(tiny_pair):
    from dominotree.decode import Decoder
    return Decoder(tiny_pair)


@pytest.fixture
def cli_for(monkeypatch, capsys, tmp_path):
    """``cli_for(pair)``: ``run(*argv) -> (exit code, stdout, stderr)`` of ``python -m dominotree``
    in ``tmp_path``, with every command's pair loading replaced by ``pair``."""
    def make(pair):
        import dominotree.cli as C
        import dominotree.pairargs
        monkeypatch.setattr(dominotree.pairargs, "load_pair_from_args", lambda a: pair)
        monkeypatch.chdir(tmp_path)

        def run(*argv):
            try:
                code = C.main(list(argv))
            except SystemExit as e:          # argparse's own usage errors
                code = e.code
            cap = capsys.readouterr()
            return code, cap.out, cap.err
        return run
    return make


@pytest.fixture(scope="session")
def smollm2_pair():
    """``smollm2_pair(dtype, weights=None)``: the embedded pair on the CPU, loaded once per
    (dtype, weights) for the whole run (slow tests only: loading quantizes and packs the target)."""
    loaded = {}

    def load(dtype: str = "float32", weights: str | None = None):
        if (dtype, weights) not in loaded:
            from dominotree.presets import load_pair
            loaded[dtype, weights] = load_pair("smollm2", dtype=dtype, device="cpu", weights=weights)
        return loaded[dtype, weights]
    return load


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of 2 CPUs for the ``--ray`` tests (tests/test_ray_*.py), shut down at the end."""
    pytest.importorskip("ray.train")
    from dominotree import cluster
    info = cluster.connect("auto", num_cpus=2)
    yield info
    cluster.shutdown()


# --- the explorer and a browser, shared by the app and e2e tests ------------------------------------

@pytest.fixture(scope="module")
def app(tiny_decoder, request):
    """The explorer on the random-tiny pair, one server for the session (``test_app.served``)."""
    from test_app import close_served, served
    request.addfinalizer(close_served)
    return served(tiny_decoder)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright (skipped where either is missing)."""
    from test_e2e import CHROMIUM, FLAGS          # skips the test when Chromium is not installed
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()
