"""A sharded rank's buddy (the rank keeping its mirror) is on another node wherever the layout
allows: `buddy_shift` is a pure rule, checked here over every layout it can meet."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.mirror import buddy_shift


def across(nodes: list[str], k: int) -> int:
    n = len(nodes)
    return sum(nodes[r] != nodes[(r + k) % n] for r in range(n))


def test_ranks_on_one_node_keep_their_next_rank_as_buddy():
    assert buddy_shift(["a"] * 4) == 1
    assert buddy_shift(["a"]) == 1


def test_blocks_of_ranks_per_node_put_every_buddy_on_the_next_node():
    assert buddy_shift(["a"] * 4 + ["b"] * 4) == 4
    assert buddy_shift(["a", "a", "b", "b", "c", "c"]) == 2
    assert buddy_shift(["a", "b", "a", "b"]) == 1  # ranks alternate: the next one is across


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=12))
def test_no_other_shift_puts_more_buddies_across_nodes(nodes):
    k = buddy_shift(nodes)
    n = len(nodes)
    assert 1 <= k < max(n, 2)
    assert {(r + k) % n for r in range(n)} == set(range(n))  # each rank is one rank's buddy
    best = max((across(nodes, j) for j in range(1, n)), default=0)
    assert across(nodes, k) == best
    assert all(across(nodes, j) < best for j in range(1, k))  # the smallest of the best
