"""Programs whose call sequences the differential tests compare with what
sys.setprofile reports. Each case is a function taking no arguments; worker
threads run `thread_body`. Keep them deterministic: no imports, no GC
dependence, no timing."""
import asyncio
import functools
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def case_recursion():
    fib(12)

    def down(n):
        if n:
            down(n - 1)
    down(200)


def gen_numbers(n):
    for i in range(n):
        yield i


def gen_delegate(n):
    yield from gen_numbers(n)
    yield -1


def gen_echo():
    total = 0
    while True:
        x = yield total
        total += x


def gen_guarded():
    try:
        yield 1
        yield 2
    finally:
        helper_noop()


def helper_noop():
    return None


def case_generators():
    sum(gen_numbers(50))
    list(gen_delegate(10))
    g = gen_echo()
    next(g)
    for i in range(5):
        g.send(i)
    g.close()
    h = gen_guarded()
    next(h)
    h.close()
    k = gen_guarded()
    next(k)
    try:
        k.throw(ValueError("x"))
    except ValueError:
        pass
    list(x * 2 for x in range(10))
    unstarted = gen_numbers(3)
    unstarted.close()


async def leaf(i):
    await asyncio.sleep(0)
    return i


async def middle(i):
    a = await leaf(i)
    b = await leaf(i + 1)
    return a + b


async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def amain():
    tasks = [asyncio.ensure_future(middle(i)) for i in range(20)]
    await asyncio.gather(*tasks)
    async for _ in agen(5):
        pass
    try:
        await failing()
    except KeyError:
        pass
    # Free the tasks here, not while the frame is torn down at return (see
    # docs/architecture.md, "Finalizers at frame teardown").
    del tasks


async def failing():
    await asyncio.sleep(0)
    raise KeyError("k")


def case_coroutines():
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(amain())
    finally:
        loop.close()
    del loop  # its __del__ runs here, not at frame teardown


def raise_at(depth):
    if depth == 0:
        raise ValueError("deep")
    raise_at(depth - 1)


def catch_mid(depth):
    try:
        raise_at(depth)
    except ValueError:
        return "caught"


def reraise():
    try:
        raise_at(2)
    except ValueError as e:
        raise RuntimeError("wrapped") from e


def case_exceptions():
    for d in range(6):
        catch_mid(d)
    try:
        reraise()
    except RuntimeError:
        pass
    try:
        {}["missing"]
    except KeyError:
        pass


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y

    @property
    def sum(self):
        return self.x + self.y

    @staticmethod
    def origin():
        return Point(0, 0)

    @classmethod
    def unit(cls):
        return cls(1, 0)


class Point3(Point):
    def __init__(self, x, y, z):
        super().__init__(x, y)
        self.z = z


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def case_objects_hot_loop():
    # Objects constructed in hot loops: on 3.13 the specialised constructor
    # call (CALL_ALLOC_AND_ENTER_INIT) pushes __init__ frames inline.
    total = 0
    for i in range(2000):
        p = Point(i, i)
        total += p.norm2()
    for i in range(500):
        Point3(i, i, i)
        Slotted(i)
    Point.origin()
    Point.unit()
    total += Point(1, 2).sum
    return total


class VarArgs:
    def __init__(self, *args):
        self.args = args


class KwOnly:
    def __init__(self, a, *, b=1):
        self.a, self.b = a, b


class Defaults:
    def __init__(self, a, b=2):
        self.a, self.b = a, b


class Inherits(Defaults):
    pass


def case_objects_init_kinds():
    # Only "simple" __init__ functions (no *args, **kwargs, keyword-only
    # parameters) are pushed inline by 3.13's specialised constructor call;
    # stackwatch watches just those: every kind, inherited ones, and a class
    # defined while tracing, each in a hot loop.
    class Local:
        def __init__(self, v):
            self.v = v

    class LocalKw:
        def __init__(self, **kw):
            self.kw = kw

    for i in range(300):
        VarArgs(i, i)
        KwOnly(i, b=i)
        KwOnly(i)
        Defaults(i)
        Defaults(i, i)
        Inherits(i)
        Local(i)
        LocalKw(v=i)


class Vec:
    """Protocol methods that specialised instructions may call inline
    (3.12+: LOAD_ATTR_PROPERTY, BINARY_SUBSCR_GETITEM,
    LOAD_ATTR_GETATTRIBUTE_OVERRIDDEN) or through slots."""

    def __init__(self, *items):
        self.items = list(items)

    @property
    def first(self):
        return self.items[0]

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)

    def __add__(self, other):
        return Vec(*[a + b for a, b in zip(self.items, other.items)])

    def __eq__(self, other):
        return self.items == other.items

    __hash__ = None

    def __iter__(self):
        return VecIter(self.items)

    def __call__(self, k):
        return k * len(self.items)

    def __contains__(self, v):
        return v in self.items


class VecIter:
    def __init__(self, items):
        self.items, self.i = items, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= len(self.items):
            raise StopIteration
        self.i += 1
        return self.items[self.i - 1]


class Watched:
    def __getattribute__(self, name):
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        return name

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


class Base:
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.tag = cls.__name__


def case_dunders():
    v = Vec(1, 2, 3)
    w = Watched()
    w.x = 1
    total = 0
    for i in range(300):
        total += v.first + v[1] + len(v) + v(i)
        total += (v + v)[2]
        total += v == v
        total += 2 in v
        total += w.x
        w.missing
        for x in v:
            total += x

    class Sub(Base):
        pass
    return total, Sub.tag


async def agen(n):
    for i in range(n):
        yield i


def case_async_generators():
    async def main():
        out = [x async for x in agen(5)]
        g = agen(3)
        out.append(await g.__anext__())
        await g.aclose()
        return out
    # Not asyncio.run(): its loop would be freed as Runner.close's frame is
    # torn down (see test_teardown_order.py); here it dies in the body.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
    del loop


def case_generator_methods():
    g = gen_echo()
    next(g)
    g.send(1)
    try:
        g.throw(ValueError)
    except ValueError:
        pass
    g2 = gen_numbers(10)
    next(g2)
    g2.close()
    for _ in range(200):
        list(gen_numbers(3))
        sum(x for x in range(3))


def decorator(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)
    return wrapper


@decorator
def decorated(x):
    return x + 1


class Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def case_misc():
    f = lambda v: v * 2  # noqa: E731
    [f(i) for i in range(10)]
    {i: f(i) for i in range(5)}
    sorted(range(10), key=lambda v: -v)
    for i in range(10):
        decorated(i)
    with Ctx():
        helper_noop()

    class Local:
        def method(self):
            return 1
    Local().method()
    list(map(f, range(5)))


class MyList(list):
    pass


def case_builtins():
    out = []
    d = {}
    for i in range(50):
        out.append(len(str(i)))
        d.setdefault(i % 7, []).append(i)
        isinstance(i, int)
    " ".join(map(str, out)).split()
    sorted(out, key=lambda v: -v)
    max(range(10), key=abs)
    ml = MyList()
    ml.append(1)
    list.append(ml, 2)
    try:
        {}.pop("missing")  # a C call that raises
    except KeyError:
        pass
    try:
        getattr(d, "nope")
    except AttributeError:
        pass
    dict.fromkeys("abc")
    any(x > 40 for x in out)


def thread_body(n):
    fib(n)
    list(gen_numbers(5))
    try:
        raise_at(3)
    except ValueError:
        pass


def case_threads():
    threads = [threading.Thread(target=thread_body, args=(8 + i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del t, threads  # freed in the body, not at frame teardown


class Finalized:
    def __init__(self, n):
        self.n = n

    def __del__(self):
        finalized_leaf(self.n)


def finalized_leaf(n):
    return n


def drops_at_return(n):
    objs = [Finalized(i) for i in range(n)]  # freed as this frame is cleared
    return len(objs)


def drops_at_raise():
    f = Finalized(-1)  # noqa: F841 - freed as this frame is cleared, unwinding
    raise ValueError("v")


def suspended_in_local():
    try:
        yield 1
    finally:
        finalized_leaf(0)


def closes_at_return():
    g = suspended_in_local()
    next(g)  # closed as this frame is cleared
    return 1


def case_teardown():
    """Python code run while a returning frame is cleared (finalizers, a
    suspended generator closed), in a hot loop: on 3.12+ it runs inside
    the evaluator's return, and must still come after the return."""
    for i in range(40):
        drops_at_return(3)
        try:
            drops_at_raise()
        except ValueError:
            pass
        closes_at_return()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
