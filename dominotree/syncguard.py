"""A host-sync guard that works on any device: ``with no_host_sync(): ...`` raises
``HostSyncError`` at the first operation that would make the host wait for the device.

A CUDA graph records device work only: inside ``torch.cuda.graph`` (and in the warm-up before it,
NVIDIA's capture checklist) any read of a device value on the host fails or, worse, is baked into
the graph as a constant. ``torch.cuda.set_sync_debug_mode("error")`` catches those reads, but only
on a GPU. This guard is a ``TorchFunctionMode``, so the same check runs on the CPU in the ordinary
test suite (``tests/test_syncguard.py`` runs the graph and frontier builders' capture regions under
it) and on CUDA around the real capture (``builders/capture.py``).

What counts as a host sync (``HOST_READS`` and the checks in ``_refuse``):

- reading values: ``.item()``, ``.tolist()``, ``.numpy()``, ``bool()`` / ``int()`` / ``float()`` /
  ``operator.index`` of a tensor, printing one, ``torch.equal`` / ``allclose`` / ``is_nonzero``;
- moving to the host: ``.cpu()``, ``.to("cpu")`` of a tensor on another device;
- output shapes that depend on values: ``nonzero``, ``masked_select``, ``unique``, ``argwhere``,
  indexing with a boolean mask;
- host data made into tensors: ``torch.tensor(...)`` / ``torch.as_tensor(...)`` (a pageable copy
  to the device).

Everything else (kernels, views, factories like ``torch.zeros(..., device=d)``) passes through.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

T = torch.Tensor
HOST_READS = {
    T.item: ".item()", T.tolist: ".tolist()", T.numpy: ".numpy()", T.cpu: ".cpu()",
    T.__bool__: "bool(tensor)", T.__int__: "int(tensor)", T.__float__: "float(tensor)",
    T.__index__: "a tensor used as an index", T.__complex__: "complex(tensor)",
    T.__array__: "numpy.asarray(tensor)", T.__repr__: "printing a tensor", T.__format__: "formatting a tensor",
    T.nonzero: ".nonzero() (value-dependent shape)", torch.nonzero: "torch.nonzero (value-dependent shape)",
    torch.argwhere: "torch.argwhere (value-dependent shape)", T.masked_select: ".masked_select (value-dependent shape)",
    torch.masked_select: "torch.masked_select (value-dependent shape)", torch.unique: "torch.unique",
    T.unique: ".unique()", torch.unique_consecutive: "torch.unique_consecutive",
    torch.equal: "torch.equal", torch.allclose: "torch.allclose", torch.is_nonzero: "torch.is_nonzero",
    T.is_nonzero: ".is_nonzero()", T.equal: ".equal()", T.allclose: ".allclose()",
    torch.tensor: "torch.tensor(host data)", torch.as_tensor: "torch.as_tensor(host data)",
}


class HostSyncError(RuntimeError):
    """An operation inside a ``no_host_sync`` region would read device values on the host."""


def _bool_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _to_host(args, kwargs) -> bool:
    """``tensor.to(...)`` moving a non-CPU tensor to the CPU."""
    src = args[0]
    if not isinstance(src, torch.Tensor) or src.device.type == "cpu":
        return False
    dev = kwargs.get("device")
    for a in args[1:]:
        if isinstance(a, (str, torch.device)):
            dev = a
        elif isinstance(a, torch.Tensor):
            dev = a.device
    return dev is not None and torch.device(dev).type == "cpu"


def _refuse(func, args, kwargs) -> str | None:
    what = HOST_READS.get(func)
    if what is not None:
        return what
    if func in (T.__getitem__, T.__setitem__) and len(args) > 1 and _bool_index(args[1]):
        return "indexing with a boolean mask (value-dependent shape)"
    if func is T.to and _to_host(args, kwargs):
        return ".to('cpu')"
    return None


class no_host_sync(TorchFunctionMode):
    """Raise ``HostSyncError`` on any host sync inside the ``with`` block (see the module doc).
    ``where`` names the region in the message."""

    def __init__(self, where: str = "a capture region"):
        super().__init__()
        self.where = where

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        what = _refuse(func, args, kwargs)
        if what is not None:
            raise HostSyncError(f"host sync in {self.where}: {what} (a CUDA graph cannot capture it; "
                                f"bind what the region needs before it starts)")
        return func(*args, **kwargs)
