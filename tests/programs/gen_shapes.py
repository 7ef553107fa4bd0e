"""A program whose stacks run through generators and coroutines, sampled
and traced by tests/py/tracer/test_sample_vs_trace.py and profiled by
tests/py/profiler/test_profiler_generators.py: a recursive tree walk whose
work runs inside a generator it iterates (the shape of ast.iter_child_nodes
walkers), a recursive `yield from` chain, exceptions raised through
recursion and through generators, asyncio coroutines awaiting coroutines,
an async generator, and a second thread walking the tree meanwhile.

    python gen_shapes.py [DEPTH [ROUNDS [PARTS]]]

PARTS: "all" (default) or "walk" (only the tree walk, on the main thread).
"""
import asyncio
import sys
import threading


class Node:
    __slots__ = ("kids",)

    def __init__(self, depth):
        self.kids = [Node(depth - 1) for _ in range(3)] if depth else []


def iter_child_nodes(node):
    for k in node.kids:
        yield k


def visit(node):
    n = 1
    for child in iter_child_nodes(node):
        n += visit(child)
    return n


def flatten(node):
    yield node
    for k in node.kids:
        yield from flatten(k)


def deep_raise(n):
    if n == 0:
        raise ValueError(n)
    try:
        return deep_raise(n - 1)
    finally:
        if n % 3 == 0:
            sum(range(20))


def catcher(rounds):
    got = 0
    for i in range(rounds):
        try:
            deep_raise(8 + i % 5)
        except ValueError:
            got += 1
    return got


def gen_raises(node):
    for k in iter_child_nodes(node):
        try:
            if not k.kids:
                raise KeyError(k)
            yield from gen_raises(k)
        except KeyError:
            yield k


async def leaf(i):
    await asyncio.sleep(0)
    return sum(range(i % 50))


async def middle(i):
    t = 0
    for j in range(3):
        t += await leaf(i + j)
    return t


async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield await middle(i)


async def consumer(k):
    t = 0
    async for v in agen(40):
        t += v
    return t


async def amain():
    return sum(await asyncio.gather(*(consumer(k) for k in range(8))))


def walker_thread(tree, rounds):
    for _ in range(rounds):
        visit(tree)
        sum(1 for _ in flatten(tree))


def main():
    tree = Node(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if len(sys.argv) > 3 and sys.argv[3] == "walk":
        for _ in range(rounds):
            visit(tree)
        return
    th = threading.Thread(target=walker_thread, args=(tree, rounds), name="walker")
    th.start()
    loop = asyncio.new_event_loop()   # (asyncio.run would call signal.getsignal)
    for _ in range(rounds):
        loop.run_until_complete(amain())
        catcher(60)
        sum(1 for _ in gen_raises(tree))
    th.join()
    loop.close()


if __name__ == "__main__":
    main()
