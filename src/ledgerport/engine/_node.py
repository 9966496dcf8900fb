"""This process as a node of the service: its id, the mark that ends with it, and the takeover
of dead nodes' claims.

The delivery engine and the function runner claim under the node's id. The node holds the
store's mark of its id for as long as it runs (``Store.hold``): on PostgreSQL a session advisory
lock, which the server drops the moment the process dies. Every TAKEOVER_EVERY seconds the node
looks for nodes whose mark it can take and gives their claims back to the queue, due before
newer work (``queues.take_over``), and wakes the claimers: a dead node's work goes out again
within a couple of seconds, not when its claims' leases run out. On SQLite, where one process
owns the file, that happens once, at start: whatever another process held is taken over at once.

A node whose mark was lost while it lived (its connection to PostgreSQL broke) takes it again,
and its row with it; what was taken over meanwhile may be sent twice, nothing is lost: only the
claim that still holds the lease records an outcome.
"""

from __future__ import annotations

import logging
import os
import socket

import trio

from ledgerport import queues
from ledgerport.ids import new_id
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

log = logging.getLogger("ledgerport.engine.node")

TAKEOVER_EVERY = 1.0
"""Seconds between two looks for dead nodes (on a store several processes share)."""
STOP_TIMEOUT = 5.0
"""Seconds a stopping node spends at most deleting its row."""


class Node:
    """This process's node: start it before the engine and the runner, which claim under
    :attr:`id`, and stop it after them."""

    def __init__(self, platform: Platform, *, every: float = TAKEOVER_EVERY) -> None:
        self._platform = platform
        self._every = every
        self.id = new_id("node")
        self._key = queues.NODE_KEY_PREFIX + self.id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        store = self._platform.store
        try:
            await store.hold(self._key)
            await self._register()
            await self.take_over_once()
            task_status.started()
            if not store.shared:
                await trio.sleep_forever()
            while True:
                await trio.sleep(self._every)
                try:
                    if await store.hold(self._key):
                        log.warning("node %s: its mark was lost and is taken again", self.id)
                        await self._register()
                    await self.take_over_once()
                except StorageError as exc:
                    log.warning("node %s: %s", self.id, exc)
                    self._platform.metrics.task_crashes.labels("node").inc()
        finally:
            with trio.move_on_after(STOP_TIMEOUT) as scope:
                scope.shield = True
                try:
                    async with store.transaction(background=True) as tx:
                        await queues.remove_node(tx, self.id)
                except StorageError as exc:
                    log.warning("node %s: removing its row: %s", self.id, exc)
                await store.let_go(self._key)

    async def _register(self) -> None:
        p = self._platform
        async with p.store.transaction(background=True) as tx:
            await queues.register_node(
                tx, node_id=self.id, host=socket.gethostname(), pid=os.getpid(), now=p.now()
            )

    async def take_over_once(self) -> queues.TakenOver:
        """Give the claims of every dead node back to the queue; answers what was taken."""
        p = self._platform
        prefix = queues.NODE_KEY_PREFIX
        alive = [key[len(prefix) :] for key in p.store.holding if key.startswith(prefix)]
        async with p.store.transaction(background=True) as tx:
            taken = await queues.take_over(tx, alive=alive)
            if taken.deliveries:
                await tx.notify(queues.DELIVERIES_CHANNEL)
            if taken.runs:
                await tx.notify(queues.FUNCTION_RUNS_CHANNEL)
        if taken.nodes or taken.deliveries or taken.runs:
            log.info(
                "node %s: took over %d deliveries and %d runs of %s",
                self.id,
                taken.deliveries,
                taken.runs,
                ", ".join(taken.nodes) or "processes gone before",
            )
            p.metrics.nodes_taken_over.inc(len(taken.nodes))
            p.metrics.claims_taken_over.labels("delivery").inc(taken.deliveries)
            p.metrics.claims_taken_over.labels("run").inc(taken.runs)
        return taken
