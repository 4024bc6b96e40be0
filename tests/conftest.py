"""Shared fixtures. Tests run offline on the CPU: ``HF_HUB_OFFLINE=1`` and a private cache."""
import os
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DOMINOTREE_CACHE", tempfile.mkdtemp(prefix="dominotree-test-cache-"))

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


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of 2 CPUs for the ``--ray`` tests (tests/test_ray_*.py), shut down at the end."""
    pytest.importorskip("ray.train")
    from dominotree import cluster
    info = cluster.connect("auto", num_cpus=2)
    yield info
    cluster.shutdown()
