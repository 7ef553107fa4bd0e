// parker.rs - a Rust cdylib whose rs_park calls back into Python from
// generic, trait-impl and closure frames (v0-mangled names).
pub trait Visit {
    fn visit(&self, cb: extern "C" fn());
}

pub struct Parker<T> {
    pub v: T,
}

#[inline(never)]
fn run<F: Fn(u64)>(f: F, x: u64) {
    f(x);
    std::hint::black_box(());
}

impl<T: Copy + Into<u64>> Visit for Parker<T> {
    #[inline(never)]
    fn visit(&self, cb: extern "C" fn()) {
        run(|x: u64| {
            if std::hint::black_box(x) < u64::MAX {
                cb();
            }
            std::hint::black_box(());
        }, self.v.into());
        std::hint::black_box(());
    }
}

#[no_mangle]
pub extern "C" fn rs_park(cb: extern "C" fn()) {
    Parker { v: 7u32 }.visit(cb);
    std::hint::black_box(());
}
