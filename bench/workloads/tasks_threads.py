"""Workload: task events' thread-heavy queue program (bench/tasks.py): 4
producer threads put ``size`` numbers in all into a queue.Queue of 16
places that 4 consumer threads drain (None ends each consumer), so threads
block on the full or empty queue and wake each other all along."""
import queue
import sys
import threading

from _harness import main

THREADS = 4


def make(size, args):
    def work():
        q = queue.Queue(maxsize=16)
        sums = []

        def produce(k):
            for i in range(k, size, THREADS):
                q.put(i)

        def consume():
            total = 0
            while (v := q.get()) is not None:
                total += v
            sums.append(total)

        consumers = [threading.Thread(target=consume, name=f"consumer-{k}") for k in range(THREADS)]
        producers = [threading.Thread(target=produce, args=(k,), name=f"producer-{k}") for k in range(THREADS)]
        for t in consumers + producers:
            t.start()
        for t in producers:
            t.join()
        for _ in consumers:
            q.put(None)
        for t in consumers:
            t.join()
        assert sum(sums) == size * (size - 1) // 2
        return sum(sums)
    return work


if __name__ == "__main__":
    sys.exit(main("tasks_threads", make, 20_000))
