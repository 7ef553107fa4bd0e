"""Workload: task events' asyncio program (bench/tasks.py): ``size`` tasks
(10,000 in `make bench`), each awaiting asyncio.sleep(0) once and putting
its number into an asyncio.Queue that one consumer task reads, gathered by
one asyncio.run(): every task is created, switched in twice, sends a
message and exits; the consumer blocks on the queue and is woken."""
import asyncio
import sys

from _harness import main


async def worker(i, q):
    await asyncio.sleep(0)
    await q.put(i)
    return i


async def consumer(q, n):
    total = 0
    for _ in range(n):
        total += await q.get()
    return total


async def run(n):
    q = asyncio.Queue()
    c = asyncio.create_task(consumer(q, n))
    results = await asyncio.gather(*(worker(i, q) for i in range(n)))
    return await c + sum(results)


def make(size, args):
    return lambda: asyncio.run(run(size))


if __name__ == "__main__":
    sys.exit(main("tasks_asyncio", make, 10_000))
