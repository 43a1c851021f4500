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
import weakref

import torch  # noqa: F401  (the extension needs torch's libraries loaded first)
import torch.distributed as dist

from ._C import ProcessGroupRinglet, version

__all__ = ["ProcessGroupRinglet", "version", "BACKEND"]

BACKEND = "ringlet"

# Every group made through the backend, for the exit handler below.
_groups = weakref.WeakSet()


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
    group = ProcessGroupRinglet(o.store, o.group_rank, o.group_size, o.timeout,
                                o.group_id or "default", _describe_store(o.store))
    _groups.add(group)
    return group


@atexit.register
def _shutdown_groups():
    """Runs what each live group has queued and joins its threads before the interpreter
    finalizes. A group's thread that dropped the last reference to a tensor during finalization
    would need the GIL to free it, and a finalizing Python answers that by ending the thread
    (which, inside a destructor, is std::terminate)."""
    for group in list(_groups):
        group.shutdown()


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
