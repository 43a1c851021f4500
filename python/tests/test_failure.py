"""A dead or silent rank gives every survivor a RuntimeError naming it, within the timeout."""
import re


def test_killed_rank_is_named_on_every_survivor(run_ranks):
    n, timeout_s = 3, 20
    ranks = run_ranks(n, "die", timeout_s, timeout=120)
    assert ranks.codes[n - 1] == 3, ranks.report()
    for r in range(n - 1):
        assert ranks.codes[r] == 0, ranks.report()
        (res,) = ranks.results(r)
        assert re.search(rf"\brank {n - 1}\b", res["error"]), res["error"]
        # One prefix, then the operation as a user calls it.
        assert res["error"].startswith(f"ringlet: all_reduce failed on rank {r}: "), res["error"]
        assert res["seconds"] < timeout_s, res


def test_timeout_of_init_process_group_is_honoured(run_ranks):
    n, timeout_s = 2, 4
    ranks = run_ranks(n, "silent", timeout_s, timeout=120)
    (res,) = ranks.results(0)
    assert ranks.codes[0] == 0, ranks.report()
    assert "timed out" in res["error"].lower() or "timeout" in res["error"].lower(), res
    # It waited for the timeout, not much longer and not much less.
    assert timeout_s * 0.5 <= res["seconds"] <= timeout_s * 3, res


def test_a_per_operation_timeout_ends_that_call(run_ranks):
    ranks = run_ranks(2, "op_timeout", timeout=120)
    (res,) = ranks.results(0)
    assert ranks.codes[0] == 0, ranks.report()
    assert "timed out" in res["error"].lower(), res
    # The operation's 0.5 s, not the group's 60 s.
    assert res["seconds"] < 10, res


def test_a_recv_without_src_that_nobody_answers_times_out(run_ranks):
    n, timeout_s = 3, 3
    ranks = run_ranks(n, "any_source_silent", timeout_s, timeout=120)
    (res,) = ranks.results(0)
    assert ranks.codes[0] == 0, ranks.report()
    assert "any source" in res["error"] and "tag 9" in res["error"], res
    assert timeout_s * 0.5 <= res["seconds"] <= timeout_s * 3, res


def test_a_pending_recv_without_src_ends_when_the_group_is_destroyed(run_ranks):
    ranks = run_ranks(2, "any_source_shutdown", timeout=120)
    (res,) = ranks.results(0)
    assert ranks.codes[0] == 0, ranks.report()
    assert "shut down" in res["error"], res
    assert res["seconds"] < 10, res  # not the group's 60 s
