"""Every operation of the ringlet backend against a reference (and gloo), at N = 2, 3, 4."""
import pytest
import torch


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_op_type_and_reduction(run_ranks, n):
    ranks = run_ranks(n, "ops", timeout=300).expect_success()
    for r in range(n):
        assert ranks.results(r)[0]["checks"] > 100


def test_large_messages_match_gloo(run_ranks):
    run_ranks(2, "large", timeout=300).expect_success()


@pytest.mark.parametrize("n", [2, 3])
def test_async_work_and_futures(run_ranks, n):
    run_ranks(n, "async").expect_success()


@pytest.mark.parametrize("n", [2, 3])
def test_isend_irecv_in_any_order_with_large_messages(run_ranks, n):
    run_ranks(n, "p2p", timeout=180).expect_success()


@pytest.mark.parametrize("n", [2, 4])
def test_recv_without_src_returns_the_sender(run_ranks, n):
    run_ranks(n, "any_source", timeout=180).expect_success()


def test_groups_side_by_side_from_threads(run_ranks):
    run_ranks(4, "groups", timeout=180).expect_success()


SEALED_TCP = {"RINGLET_TRANSPORT": "tcp", "RINGLET_SOCKET_ENCRYPT": "1"}


def test_every_op_over_sealed_tcp_links(run_ranks):
    """Through links whose bytes are sealed (AES-256-GCM), as across an untrusted network."""
    ranks = run_ranks(3, "ops", timeout=300, env=SEALED_TCP).expect_success()
    for r in range(3):
        assert ranks.results(r)[0]["checks"] > 100


def test_groups_over_sealed_tcp_links_say_so(run_ranks):
    ranks = run_ranks(4, "groups", timeout=180, env=SEALED_TCP).expect_success()
    for r in range(4):
        links = ranks.results(r)[0]["links"]
        assert links.count("tcp+sealed") == 3, links


@pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                    reason="PyTorch 1.x has no coalesced all-gather / reduce-scatter into tensors")
@pytest.mark.parametrize("n", [2, 3])
def test_coalesced_gathers_and_scatters_into_tensors(run_ranks, n):
    run_ranks(n, "coalesced").expect_success()


def test_bad_calls_are_refused_with_a_named_error(run_ranks):
    run_ranks(2, "errors").expect_success()


@pytest.mark.parametrize("n", [2, 3])
def test_every_kind_of_store(run_ranks, n, tmp_path):
    ranks = run_ranks(n, "stores", tmp_path, timeout=180).expect_success()
    for r in range(n):
        assert ranks.results(r)[0]["checks"] == 6


def test_hash_store_with_thread_ranks(run_ranks):
    ranks = run_ranks(1, "hash_store", 3, timeout=180).expect_success()
    assert ranks.results(0)[0]["ranks"] == 3
