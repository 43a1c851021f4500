"""ringlet as a torch.distributed backend.

    import torch.distributed as dist
    import ringlet_torch  # registers the "ringlet" backend

    dist.init_process_group("ringlet")  # env:// (torchrun, ringlet-run), file://, or a store

Every process group made with backend "ringlet" (init_process_group, new_group) runs its
collectives on a ringlet communicator of its own. ringlet sets itself up through the store that
torch hands the backend (TCPStore, FileStore, HashStore or a PrefixStore around one), so it
needs no port of its own; its RINGLET_* variables (transport, algorithms, ...) apply as usual,
and the group's timeout bounds every wait.
"""

import atexit
import os

import torch  # noqa: F401  (the extension needs torch's libraries loaded first)
import torch.distributed as dist

from ._C import ProcessGroupRinglet, _shutdown_all, version

__all__ = ["ProcessGroupRinglet", "version", "BACKEND", "backend_of"]

BACKEND = "ringlet"

# PyTorch 1.x makes the backend's object the process group itself; 2.x wraps it (a c10d Backend)
# in a ProcessGroup of its own, one backend per device type.
_TORCH_MAJOR = int(torch.__version__.split(".")[0])


def _describe_store(store):
    # Names the store in errors; "tcp store HOST:PORT" also tells ringlet's TCP transport which
    # interface reaches the other ranks (the one that routes to the store's host).
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        return f"tcp store {addr}:{port} (torch)"
    return f"torch {type(store).__name__}"


def _create(backend_options, pg_options=None):
    if pg_options is not None:
        raise RuntimeError("ringlet: init_process_group(pg_options=...) is not supported; "
                           "configure ringlet with RINGLET_* environment variables")
    o = backend_options
    return ProcessGroupRinglet(o.store, o.group_rank, o.group_size, o.timeout,
                               o.group_id or "default", _describe_store(o.store))


def backend_of(group=None):
    """The ProcessGroupRinglet that runs `group`'s collectives (default: the default group), for
    its `describe_links()` and `algorithm_for()`. PyTorch 1.x returns the group itself; in 2.x
    it is the group's backend for CPU tensors."""
    if group is None:
        group = dist.group.WORLD
        if group is None:
            raise RuntimeError("ringlet: backend_of(): no default process group "
                               "(call torch.distributed.init_process_group first)")
    if isinstance(group, ProcessGroupRinglet):
        return group
    backend = None
    if _TORCH_MAJOR >= 2:
        try:
            backend = group._get_backend(torch.device("cpu"))
        except RuntimeError:
            backend = None
    if not isinstance(backend, ProcessGroupRinglet):
        raise RuntimeError(f"ringlet: backend_of(): the group's backend is "
                           f"{group.name() if hasattr(group, 'name') else type(group).__name__}, "
                           f"not ringlet")
    return backend


@atexit.register
def _shutdown_groups():
    """Runs what each live group has queued and joins its threads before the interpreter
    finalizes. A group's thread that dropped the last reference to a tensor during finalization
    would need the GIL to free it, and a finalizing Python answers that by ending the thread
    (which, inside a destructor, is std::terminate). Every group made, whether Python still holds
    it or not (PyTorch 2 keeps a group's backend in C++ only)."""
    _shutdown_all()


if BACKEND.upper() not in dist.Backend._plugins:
    if _TORCH_MAJOR >= 2:
        # CPU tensors only (this build's checks refuse others by name).
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)
