// parker.rs - a Rust library (cdylib, v0-mangled names) whose rs_park
// calls back into Python (a ctypes callback) from a generic function
// instantiated with a closure of a trait impl's method of a generic struct
// (tests/py/cli/test_dump_native.py). The counter's updates after each
// call keep the calls from becoming tail calls (Rust 1.63: no black_box).
use std::sync::atomic::{AtomicU64, Ordering};

static AFTER: AtomicU64 = AtomicU64::new(0);

pub trait Visit {
    fn visit(&self, cb: extern "C" fn());
}

pub struct Parker<T> {
    pub v: T,
}

#[inline(never)]
fn run<F: Fn(u64)>(f: F, x: u64) {
    f(x);
    AFTER.fetch_add(1, Ordering::SeqCst);
}

impl<T: Copy + Into<u64>> Visit for Parker<T> {
    #[inline(never)]
    fn visit(&self, cb: extern "C" fn()) {
        run(
            |x: u64| {
                cb();
                AFTER.fetch_add(x, Ordering::SeqCst);
            },
            self.v.into(),
        );
        AFTER.fetch_add(1, Ordering::SeqCst);
    }
}

#[no_mangle]
pub extern "C" fn rs_park(cb: extern "C" fn()) {
    Parker { v: 7u32 }.visit(cb);
    AFTER.fetch_add(1, Ordering::SeqCst);
}
