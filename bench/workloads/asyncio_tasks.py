"""Workload: an asyncio program with thousands of tasks: ``size`` tasks each
await asyncio.sleep(0) ``--awaits`` times (every await is a suspension and
a resumption of the task's coroutine), gathered by one asyncio.run()."""
import asyncio
import sys

from _harness import main


async def worker(i, awaits):
    total = 0
    for _ in range(awaits):
        await asyncio.sleep(0)
        total += i
    return total


async def run(ntasks, awaits):
    results = await asyncio.gather(*(worker(i, awaits) for i in range(ntasks)))
    return sum(results)


def make(size, args):
    return lambda: asyncio.run(run(size, args.awaits))


def add_args(p):
    p.add_argument("--awaits", type=int, default=3, help="sleep(0) awaits per task")


if __name__ == "__main__":
    sys.exit(main("asyncio", make, 5000, add_args))
