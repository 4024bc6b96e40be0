"""The Ray connection shared by ``bench --ray`` and ``train --ray``: start a small local cluster
(``auto``) or join one at an address, and describe the workers' machines.

Ray is imported here, inside the functions, and only the commands that take ``--ray`` call them:
``import dominotree`` and the explorer never load it. ``auto`` starts a private local cluster
(``ray.init(address="local")``) sized for the machine: ``num_cpus`` = its CPUs, a small object
store, no dashboard, usage statistics off, so it starts offline. Any other value is handed to
``ray.init(address=...)`` (``HOST:6379`` of a ``ray start --head``, or ``ray://HOST:10001``).

Workers import ``dominotree`` from this checkout (``PYTHONPATH`` in the job's runtime env): on a
real cluster every node needs the same checkout at the same path (a shared filesystem or one
container image) and the same Python environment.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OBJECT_STORE_MB = 256     # records and gradients are small; Ray's default takes 30 % of RAM


class ClusterError(Exception):
    """Ray is missing, or the cluster cannot be reached or cannot hold the workers asked for."""


def _ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs the `ray` package: pip install -r requirements.txt "
                           "(or pip install 'ray[train]==2.60.0')") from None
    return ray


def connect(address: str = "auto", num_cpus: int | None = None) -> dict:
    """Start (``auto``) or join (an address) a Ray cluster; returns {address, nodes, cpus}."""
    ray = _ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
           "TOKENIZERS_PARALLELISM": "false", "RAY_USAGE_STATS_ENABLED": "0"}
    for k in ("HF_HUB_OFFLINE", "HF_HOME", "DOMINOTREE_CACHE"):
        if k in os.environ:
            env[k] = os.environ[k]
    if not ray.is_initialized():
        kw = dict(runtime_env={"env_vars": env}, log_to_driver=True, configure_logging=False)
        try:
            if address in ("auto", "local", None):
                ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                         object_store_memory=OBJECT_STORE_MB * 2**20, **kw)
            else:
                _check_reachable(address)
                ray.init(address=address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {str(e).splitlines()[0]}") from None
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"address": address, "nodes": len(nodes),
            "cpus": int(ray.cluster_resources().get("CPU", 0)),
            "node_cpus": [int(n["Resources"].get("CPU", 0)) for n in nodes]}


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when HOST:PORT does not answer."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--ray expects 'auto' or HOST:PORT (ray://HOST:PORT for Ray Client), got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ClusterError(f"no Ray cluster answers at {hostport} ({e.strerror or e}); start one with "
                           f"`ray start --head --port {port}` or use --ray auto") from None


def shutdown() -> None:
    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()


def plan_workers(info: dict, workers: int | None, cpus_per_worker: int | None) -> tuple[int, int]:
    """(workers, CPUs each): by default one worker per node with the smallest node's CPUs, so no two
    workers share a machine's cores (their timings would disturb each other)."""
    nodes, node_cpus = max(info["nodes"], 1), [c for c in info["node_cpus"] if c > 0] or [1]
    if workers is not None and workers < 1:
        raise ClusterError("--ray-workers must be >= 1")
    if cpus_per_worker is not None and cpus_per_worker < 1:
        raise ClusterError("--ray-cpus-per-worker must be >= 1")
    n = workers or nodes
    per_node = -(-n // nodes)
    c = cpus_per_worker or max(1, min(node_cpus) // per_node)
    fits = sum(cpus // c for cpus in node_cpus)
    if fits < n:
        raise ClusterError(f"{n} workers of {c} CPUs do not fit the cluster's nodes ({node_cpus} CPUs): "
                           f"lower --ray-workers or --ray-cpus-per-worker")
    return n, c


def worker_identity() -> dict:
    """Where this process runs: host, node IP, pid and the CPU model (inside a Ray worker)."""
    from .machine import cpu_isa, cpu_model
    try:
        import ray
        node = ray.get_runtime_context().get_node_id()
    except Exception:   # noqa: BLE001 - outside Ray
        node = ""
    return {"host": socket.gethostname(), "node_id": node, "pid": os.getpid(), "cpu": cpu_model(),
            "cpu_isa": cpu_isa(), "cpu_count": os.cpu_count()}


def describe_workers(infos: list[dict]) -> str:
    """``2 Ray workers: AMD EPYC 9B45 (2 x 1 threads)`` grouped by CPU model."""
    by: dict[str, list[dict]] = {}
    for w in infos:
        by.setdefault(w["cpu"], []).append(w)
    parts = [f"{cpu} ({len(ws)} x {ws[0].get('torch_threads', '?')} threads)" for cpu, ws in by.items()]
    return f"{len(infos)} Ray worker{'s' if len(infos) != 1 else ''}: " + "; ".join(parts)
