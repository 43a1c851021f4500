"""PyTorch's own DistributedDataParallel trains the same model on ringlet as on gloo."""
import torch


def test_ddp_matches_gloo_after_50_steps(run_ranks, tmp_path):
    params = {}
    for backend in ("gloo", "ringlet"):
        path = tmp_path / f"{backend}.pt"
        run_ranks(2, "ddp", backend, 50, path, timeout=300).expect_success()
        params[backend] = torch.load(path)
    assert len(params["gloo"]) == len(params["ringlet"]) == 4
    for g, r in zip(params["gloo"], params["ringlet"]):
        scale = g.abs().max().item()
        assert (g - r).abs().max().item() <= 1e-6 * max(scale, 1.0), (g, r)
    # The model did train: the parameters moved away from their initial values.
    torch.manual_seed(0)
    init = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    moved = max((p.detach() - q).abs().max().item()
                for p, q in zip(init.parameters(), params["ringlet"]))
    assert moved > 1e-3


def test_ddp_with_buffers_and_unused_parameters_matches_gloo(run_ranks, tmp_path):
    params = {}
    for backend in ("gloo", "ringlet"):
        path = tmp_path / f"{backend}.pt"
        run_ranks(2, "ddp", backend, 20, path, "full", timeout=300).expect_success()
        params[backend] = torch.load(path)
    assert len(params["gloo"]) == len(params["ringlet"]) > 6
    for g, r in zip(params["gloo"], params["ringlet"]):
        scale = g.abs().max().item() if g.numel() else 1.0
        assert (g - r).abs().max().item() <= 1e-6 * max(scale, 1.0), (g, r)
