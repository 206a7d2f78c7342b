"""Operators' commands on the control port (`yoco-agent status / drain / inject`): one request,
one reply, then the connection closes (protocol.control_request is the client)."""

from __future__ import annotations

from collections.abc import Callable

from agent.membership import Membership
from agent.protocol import Channel, ChannelClosed


def answer(channel: Channel, request: dict, membership: Membership, status: Callable[[], dict]):
    """Carry out `request` and reply on `channel`; `status()`: the job's status document."""
    kind = request["type"]
    try:
        if kind == "status":
            reply = {"ok": True, **status()}
        elif kind == "drain":
            ranks = _ranks_for(request, membership)
            for rank in ranks:
                membership.drain(rank)
            reply = {"ok": True, "ranks": ranks}
        elif kind == "inject":
            (rank,) = _ranks_for(request, membership)
            worker = membership.worker(rank)
            fault = {"kind": request["kind"], "xid": request.get("xid")}
            membership.send(worker, {"type": "inject", "fault": fault})
            reply = {"ok": True, "rank": rank, "pid": worker.pid}
        else:
            reply = {"ok": False, "error": f"unknown request {kind!r}"}
    except (LookupError, ValueError) as error:
        reply = {"ok": False, "error": str(error)}
    try:
        channel.send(reply)
    except ChannelClosed:
        pass
    channel.close()


def _ranks_for(request: dict, membership: Membership) -> list[int]:
    """The ranks a request names: one `rank`, or every worker on a `node`."""
    if request.get("rank") is not None:
        rank = int(request["rank"])
        membership.worker(rank)
        return [rank]
    return membership.ranks_on(request.get("node"))
