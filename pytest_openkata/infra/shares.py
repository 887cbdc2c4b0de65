"""A run's caps split between groups of processes that cannot see each other's locks.

The in-flight cap (``max_in_flight``) and an engine pool's room are counted through lock files
in a folder that every process of a group sees: the xdist workers on one host and in one
checkout. Workers on other hosts have folders of their own, so a cap counted per folder would
multiply by the number of hosts. Instead each group gets a share of every cap, in proportion to
its workers (largest remainders first), and the shares add up to the cap: the cap holds across
hosts while the workers of a group share their part among themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALONE", "Share", "apportion"]


def apportion(total: int, weights: Sequence[int], first: int = 0) -> list[int]:
    """``total`` split in proportion to ``weights``, in whole parts that add up to ``total``:
    each gets the whole part of its quota, then the largest remainders one more each; equal
    remainders go in order from index ``first`` on (so that several small caps split with
    different ``first`` do not all favour the same group)."""
    if total < 0 or not weights or any(weight < 1 for weight in weights):
        raise ValueError(f"cannot split {total} by {list(weights)}")
    whole = sum(weights)
    parts = [total * weight // whole for weight in weights]
    count = len(weights)
    order = sorted(
        range(count),
        key=lambda i: (-(total * weights[i] % whole), (i - first) % count),
    )
    for index in order[: total - sum(parts)]:
        parts[index] += 1
    return parts


@dataclass(frozen=True)
class Share:
    """This process's group (``index``) among groups of ``weights`` workers each."""

    index: int = 0
    weights: tuple[int, ...] = (1,)

    def of(self, total: int, first: int = 0) -> int:
        """This group's part of a cap of ``total`` (see :func:`apportion`)."""
        return apportion(total, self.weights, first)[self.index]

    @property
    def alone(self) -> bool:
        """Whether this is the run's only group (its part of a cap is all of it)."""
        return len(self.weights) == 1

    @property
    def folder(self) -> str:
        """The subfolder of this group's lock files ("" for the only group), so that groups
        that happen to see one folder still count their parts apart."""
        return "" if self.alone else f"group-{self.index}"


ALONE = Share()
"""The share of a run without other hosts: all of every cap."""
