"""The bundled example `make demo` traces: a little of everything stackwatch
records - recursion, methods and constructors, a generator, an exception,
asyncio tasks and a worker thread."""
import asyncio
import threading


class Vector:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __add__(self, other):
        return Vector(self.x + other.x, self.y + other.y)

    def norm2(self):
        return self.x * self.x + self.y * self.y


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def squares(n):
    for i in range(n):
        yield i * i


def checked_div(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        return float("inf")


async def fetch(i):
    await asyncio.sleep(0.001 * (i % 3))
    return fib(12)


async def crawl():
    return await asyncio.gather(*(fetch(i) for i in range(20)))


def worker():
    total = Vector(0, 0)
    for i in range(2000):
        total = total + Vector(i, 1)
    return total.norm2()


def main():
    t = threading.Thread(target=worker, name="vector-worker")
    t.start()
    print("fib(20) =", fib(20))
    print("sum of squares =", sum(squares(1000)))
    print("1/0 =", checked_div(1, 0))
    print("crawled", len(asyncio.run(crawl())), "pages")
    t.join()


if __name__ == "__main__":
    main()
