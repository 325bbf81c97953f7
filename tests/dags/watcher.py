"""The ``on_data`` watcher's trigger driven in-process, as the triggerer drives it (:class:`Fired`).

``ON_DATA`` is the replication section of a topology whose every level is ``on_data``.
"""

from __future__ import annotations

import asyncio
import contextlib

ON_DATA = "replication: {schedule: on_data, on_data: {poll: 500ms, floor: 2s}}"


class Fired:
    """The trigger's ``run()`` driven in a background task, as the triggerer drives it; its events, waited for."""

    def __init__(self, trigger) -> None:
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue = asyncio.Queue()

        async def drive():
            async for event in trigger.run():
                await self.queue.put(event)
        self.task = self.loop.create_task(drive())

    def next(self, timeout: float):
        """The next event, or ``None`` if none comes within ``timeout`` seconds (the trigger keeps running)."""
        async def one():
            try:
                return await asyncio.wait_for(self.queue.get(), timeout)
            except TimeoutError:
                if self.task.done():
                    self.task.result()  # the trigger died: say why
                return None
        return self.loop.run_until_complete(one())

    def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)
        self.loop.close()
