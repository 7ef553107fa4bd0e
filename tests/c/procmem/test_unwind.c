/*
 * test_unwind.c - the remote unwinder (native/procmem/unwind.h) against
 * libgcc's: a forked child takes its own backtrace() in a known call chain
 * (top -> mid -> leaf) and then blocks in pause(); the unwinder stops it
 * from outside and unwinds it from its registers with the CFI of the
 * files it maps. The return addresses from leaf's caller down to the
 * outermost frame equal the child's own backtrace, the symbols name the
 * chain (and a function of its vDSO, read from its memory), and the
 * child was never signalled (it is still in pause(), and
 * goes on when let go). Then the frame-pointer fallback and its bounds
 * on a crafted stack of this process (an address without CFI; a chain
 * that does not go up the stack ends).
 */
#define _GNU_SOURCE
#include "check.h"
#include "elf/elf.h"
#include "gcorechild.h"
#include "procmem/coremem.h"
#include "procmem/symbols.h"
#include "procmem/unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/prctl.h>

static volatile int sink;

__attribute__((noinline)) static void leaf(int fd)
{
    void *bt[64];
    int n = backtrace(bt, 64);
    if (write(fd, &n, sizeof n) != (ssize_t)sizeof n || write(fd, bt, (size_t)n * sizeof *bt) < 0)
        _exit(3);
    for (;;) {
        pause();
        if (write(fd, "w", 1) != 1)   /* woken: said so */
            _exit(3);
    }
}

__attribute__((noinline)) static void mid(int fd)
{
    leaf(fd);
    sink++;
}

__attribute__((noinline)) static void top(int fd)
{
    mid(fd);
    sink++;
}

/* The first number of /proc/PID/syscall: the system call the task is
 * blocked in, -1 if it runs. */
static long blocked_in(int pid)
{
    char path[64], buf[128] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 && buf[0] >= '0' && buf[0] <= '9' ? strtol(buf, NULL, 10) : -1;
}

/* The address of the symbol name of this process's vDSO (read through the
 * ELF room from its mapping), or 0. */
static uint64_t vdso_symbol(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long long start = 0, end = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &start, &end) == 2)
            break;
    if (f)
        fclose(f);
    sw_elf *e;
    char err[256];
    if (!start || end <= start ||
        sw_elf_from_bytes((const void *)(uintptr_t)start, (size_t)(end - start), &e, err, sizeof err) != SW_OK)
        return 0;
    size_t nseg;
    const sw_elf_segment *seg = sw_elf_segments(e, &nseg);
    sw_elf_symbol sy;
    uint64_t addr = 0;
    if (nseg && sw_elf_find_symbol(e, name, &sy) == SW_OK)
        addr = start - (seg[0].vaddr & ~0xfffull) + sy.value;
    sw_elf_free(e);
    return addr;
}

TEST(unwinds_a_stopped_child_as_its_own_backtrace)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* gone with the test, whatever fails */
        close(fds[0]);
        top(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    int n = 0;
    void *bt[64];
    REQUIRE(read(fds[0], &n, sizeof n) == (ssize_t)sizeof n && n > 3 && n <= 64);
    REQUIRE(read(fds[0], bt, (size_t)n * sizeof *bt) == (ssize_t)((size_t)n * sizeof *bt));
    double deadline = check_now() + 20;
    while (blocked_in(child) != 34 /* pause */ && check_now() < deadline)
        usleep(1000);
    CHECK(blocked_in(child) == 34);

    sw_mem m;
    char err[256];
    REQUIRE(sw_mem_open(&m, child, (uint64_t)(uintptr_t)&sink, sizeof sink, err, sizeof err) == SW_OK);
    sw_unwinder *u = sw_unwinder_new(child, &m);
    REQUIRE(u != NULL);
    uint64_t pcs[256];
    uint8_t flags[256];
    int trunc = 1;
    int got = sw_unwind_capture(u, child, pcs, flags, 256, &trunc);
    sw_unwind_release(u);
    REQUIRE(got > 0);
    CHECK(!trunc);
    /* From the return into mid down to the outermost frame, ours equal
     * the child's own backtrace (whose first entries are in leaf, and
     * under ASan in its interceptor of backtrace() before that); ours
     * start in pause(), then leaf. */
    int common = 0;
    while (common < got && common < n && pcs[got - 1 - common] == (uint64_t)(uintptr_t)bt[n - 1 - common])
        common++;
    int k = got - common, j = n - common;
    if (k < 2 || j < 1 || common < 5) {
        for (int i = 0; i < got; i++)
            printf("  ours %d: %#" PRIx64 "\n", i, pcs[i]);
        for (int i = 0; i < n; i++)
            printf("  backtrace %d: %p\n", i, bt[i]);
    }
    REQUIRE(k >= 2 && j >= 1 && common >= 5);
    for (int i = 0; i < got; i++)
        CHECK(flags[i] == 0);   /* all by the CFI */
    /* Named: pause's frame, then leaf, mid, top (the byte before each
     * return address); the backtrace's last frame before them is leaf. */
    sw_symbols *syms = sw_symbols_new_remote(u);
    REQUIRE(syms != NULL);
    int ev;
    const sw_sample_code *c = sw_symbols_lookup(syms, pcs[k - 1] - 1, &ev);
    CHECK(c && strcmp(c->name, "leaf [native]") == 0);
    c = sw_symbols_lookup(syms, (uint64_t)(uintptr_t)bt[j - 1] - 1, &ev);
    CHECK(c && strcmp(c->name, "leaf [native]") == 0);
    c = sw_symbols_lookup(syms, pcs[k] - 1, &ev);
    CHECK(c && strcmp(c->name, "mid [native]") == 0);
    c = sw_symbols_lookup(syms, pcs[k + 1] - 1, &ev);
    CHECK(c && strcmp(c->name, "top [native]") == 0);
    c = sw_symbols_lookup(syms, pcs[0], &ev);
    CHECK(c && strstr(c->name, "pause") != NULL);
    /* The vDSO, which is no file: named from its image in the child's
     * memory (mapped where this process has it, as fork left it) */
    uint64_t vdso_clock = vdso_symbol("__vdso_clock_gettime");
    CHECK(vdso_clock != 0);
    c = vdso_clock ? sw_symbols_lookup(syms, vdso_clock + 1, &ev) : NULL;
    CHECK(c && strcmp(c->name, "clock_gettime [native]") == 0 && strcmp(c->filename, "[vdso]") == 0);
    sw_symbols_free(syms);
    sw_unwind_stats st;
    sw_unwind_get_stats(u, &st);
    CHECK_EQ_U64(st.captures, 1);
    CHECK(st.files >= 2);   /* this program and libc */
    /* Not signalled: still in pause(), nothing written since. */
    CHECK(blocked_in(child) == 34);
    int fl = fcntl(fds[0], F_GETFL);
    fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
    char w;
    CHECK(read(fds[0], &w, 1) < 0);
    /* A thread that is gone. */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(sw_unwind_capture(u, child, pcs, flags, 256, &trunc) < 0);
    sw_unwinder_free(u);
    sw_mem_close(&m);
    close(fds[0]);
}

TEST(frame_pointers_where_no_cfi_and_the_walk_ends)
{
    sw_mem m;
    char err[256];
    REQUIRE(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)&sink, sizeof sink, err, sizeof err) == SW_OK);
    sw_unwinder *u = sw_unwinder_new(getpid(), &m);
    REQUIRE(u != NULL);
    /* rip at an unmapped address (no file, no CFI); rbp at a frame whose
     * saved rbp points to itself, with a return address 0x20 (again no
     * CFI): the second step would not go up the stack, so it ends. */
    uint64_t *stk = calloc(16, sizeof *stk);
    REQUIRE(stk != NULL);
    stk[2] = (uint64_t)(uintptr_t)&stk[2];
    stk[3] = 0x20;
    uint64_t regs[SW_CFI_NREGS] = {0};
    regs[SW_CFI_RA] = 0x10;
    regs[SW_CFI_RSP] = (uint64_t)(uintptr_t)&stk[0];
    regs[SW_CFI_RBP] = (uint64_t)(uintptr_t)&stk[2];
    uint64_t pcs[8];
    uint8_t flags[8];
    int trunc = 1;
    int n = sw_unwind_regs(u, regs, pcs, flags, 8, &trunc);
    CHECK_EQ_U64((uint64_t)n, 2);
    CHECK(pcs[0] == 0x10 && pcs[1] == 0x20 && !trunc);
    CHECK(flags[0] == SW_UNWIND_BY_FP && flags[1] == SW_UNWIND_BY_FP);
    /* A chain longer than max: truncated at max. */
    for (int i = 0; i < 7; i++) {
        stk[2 * i] = (uint64_t)(uintptr_t)&stk[2 * i + 2];
        stk[2 * i + 1] = 0x100 + (uint64_t)i;
    }
    regs[SW_CFI_RBP] = (uint64_t)(uintptr_t)&stk[0];
    n = sw_unwind_regs(u, regs, pcs, flags, 4, &trunc);
    CHECK_EQ_U64((uint64_t)n, 4);
    CHECK(trunc && pcs[1] == 0x100 && pcs[3] == 0x102);
    /* An unreadable frame pointer: one frame. */
    regs[SW_CFI_RBP] = 0x8;
    regs[SW_CFI_RSP] = 0x0;
    n = sw_unwind_regs(u, regs, pcs, flags, 8, &trunc);
    CHECK_EQ_U64((uint64_t)n, 1);
    free(stk);
    sw_unwinder_free(u);
    sw_mem_close(&m);
}

/* A libc function of this process (libc stripped: no .debug_line of its
 * own) gets its source file and line from libc's separate debug file
 * (found by build id; its sections compressed), the ones gdb gives. */
TEST(stripped_libcs_source_lines_from_its_debug_file)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *fn = libc ? dlsym(libc, "pause") : NULL;   /* (libc's own, whatever ASan interposes) */
    REQUIRE(fn != NULL);
    Dl_info di;
    REQUIRE(dladdr(fn, &di) && di.dli_fname);
    char cmd[600], line[1024], want_file[512] = "";
    unsigned want_line = 0;
    snprintf(cmd, sizeof cmd, "gdb -batch -nx -ex 'info line pause' '%s' 2>/dev/null", di.dli_fname);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "Line %u of \"%511[^\"]\"", &want_line, want_file) == 2)
            break;
    pclose(p);
    if (!want_line) {   /* gdb knows no line: no debug file here (or no gdb) */
        CHECK_MSG(!getenv("CI"), "gdb gives no line for libc's pause (Debian: libc6-dbg, gdb; make deps)");
        return;
    }
    sw_symbols *s = sw_symbols_new();
    REQUIRE(s != NULL);
    int ev;
    const sw_sample_code *c = sw_symbols_lookup(s, (uint64_t)(uintptr_t)fn, &ev);
    const char *file = NULL;
    uint32_t got = 0;
    int rc = c ? sw_symbols_source(s, c->addr, &file, &got) : SW_EARG;
    /* (the same file: gdb prints its name as the unit gives it, this reader
     * joined to the compilation directory, as addr2line does) */
    const char *base = rc == SW_OK ? strrchr(file, '/') : NULL, *want_base = strrchr(want_file, '/');
    CHECK_MSG(rc == SW_OK && got == want_line && strcmp(base ? base : file, want_base ? want_base : want_file) == 0,
              "%s:%u, gdb %s:%u",
              rc == SW_OK ? file : "(none)", got, want_file, want_line);
    sw_symbols_free(s);
}

/* A core of a child (gdb's gcore): its vDSO, which no file holds, is
 * found through the core's auxiliary vector and named from the core's
 * bytes, as a live process's from its memory. */
TEST(a_cores_vdso_is_named_from_its_bytes)
{
    uint64_t vdso_clock = vdso_symbol("__vdso_clock_gettime");
    REQUIRE(vdso_clock != 0);
    gcore_child g;
    if (!gcore_child_take(&g))
        return;
    sw_coremem *cm;
    char err[256];
    if (CHECK(sw_coremem_open(g.path, NULL, &cm, err, sizeof err) == SW_OK)) {
        sw_mem m;
        sw_mem_open_core(&m, cm);
        sw_unwinder *u = sw_unwinder_new_core(cm, &m);
        sw_symbols *syms = u ? sw_symbols_new_remote(u) : NULL;
        int ev;
        const sw_sample_code *c = syms ? sw_symbols_lookup(syms, vdso_clock + 1, &ev) : NULL;
        CHECK_MSG(c && strcmp(c->name, "clock_gettime [native]") == 0 && strcmp(c->filename, "[vdso]") == 0, "%s",
                  c ? c->name : "(none)");
        sw_symbols_free(syms);
        sw_unwinder_free(u);
        sw_mem_close(&m);
        sw_coremem_free(cm);
    }
    gcore_child_remove(&g);
}
