/*
 * demangle_rust.c - v0 Rust names made readable (demangle_rust.h): a
 * recursive-descent parser of the mangling's grammar that prints as it
 * parses, into a buffer of bounded size; parts that are parsed but not
 * printed (an impl's path, the instantiating crate) are parsed quietly,
 * without following their back-references.
 */
#define _GNU_SOURCE   /* strnlen under -std=c11 */
#include "demangle_rust.h"

#include "demangle.h"   /* SW_DEMANGLE_MAX, SW_DEMANGLE_OUT_MAX */

#include "base/base.h"   /* sw_decimal */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct rparse {
    const char *s;           /* the name after "_R" */
    size_t len, pos;
    char *out;
    size_t olen;
    unsigned quiet;          /* > 0: parse only */
    unsigned depth;          /* nesting of the parse functions */
    unsigned steps;
    uint64_t lifetimes;      /* lifetimes bound by the binders around (for<'a, ...>) */
    int err;
    char ident[SW_RUST_IDENT_MAX * 4];   /* the last punycode identifier, decoded to UTF-8 */
} rparse;

/* Each parse function starts with this: depth and steps bounded. */
static int enter(rparse *p)
{
    if (p->err || ++p->depth > SW_RUST_DEMANGLE_DEPTH || ++p->steps > SW_RUST_DEMANGLE_STEPS)
        p->err = 1;
    return !p->err;
}

static void leave(rparse *p) { p->depth--; }

static void put_n(rparse *p, const char *t, size_t n)
{
    if (p->quiet || p->err)
        return;
    if (n > SW_DEMANGLE_OUT_MAX - p->olen) {
        p->err = 1;
        return;
    }
    memcpy(p->out + p->olen, t, n);
    p->olen += n;
}

static void put(rparse *p, const char *t) { put_n(p, t, strlen(t)); }

static void put_u64(rparse *p, uint64_t v)
{
    char buf[SW_DECIMAL_MAX];
    put(p, sw_decimal(buf, v));
}

static int peek(const rparse *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static int eat(rparse *p, char c)
{
    if (peek(p) != (unsigned char)c)
        return 0;
    p->pos++;
    return 1;
}

static int next(rparse *p)
{
    int c = peek(p);
    if (c < 0)
        p->err = 1;
    else
        p->pos++;
    return c;
}

/* <base-62-number>: "_" is 0, digits then "_" their value + 1. */
static uint64_t base62(rparse *p)
{
    if (eat(p, '_'))
        return 0;
    uint64_t v = 0;
    for (;;) {
        int c = next(p);
        if (c == '_')
            break;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'z' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'Z' ? (unsigned)(c - 'A' + 36)
                                            : 99;
        if (d == 99 || v > (UINT64_MAX - d) / 62) {
            p->err = 1;
            return 0;
        }
        v = v * 62 + d;
    }
    if (v == UINT64_MAX)
        p->err = 1;
    return v + 1;
}

/* An optional tag and base-62 number: 0 without the tag, else the number + 1. */
static uint64_t opt_base62(rparse *p, char tag)
{
    if (!eat(p, tag))
        return 0;
    uint64_t v = base62(p);
    if (v == UINT64_MAX)
        p->err = 1;
    return v + 1;
}

/* <decimal-number>: "0", or digits not starting with 0. */
static uint64_t decimal(rparse *p)
{
    int c = next(p);
    if (c < '0' || c > '9') {
        p->err = 1;
        return 0;
    }
    uint64_t v = (uint64_t)(c - '0');
    if (v == 0)
        return 0;
    while ((c = peek(p)) >= '0' && c <= '9') {
        if (v > (UINT64_MAX - 9) / 10) {
            p->err = 1;
            return 0;
        }
        v = v * 10 + (uint64_t)(c - '0');
        p->pos++;
    }
    return v;
}

/* One code point as UTF-8 at out (room for 4 bytes): its length. */
static size_t utf8_put(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Punycode's bias adaptation (RFC 3492, section 6.1). */
static uint32_t puny_adapt(uint32_t delta, uint32_t points, int first)
{
    delta = first ? delta / 700 : delta / 2;
    delta += delta / points;
    uint32_t k = 0;
    while (delta > ((36 - 1) * 26) / 2) {
        delta /= 36 - 1;
        k += 36;
    }
    return k + (36 * delta) / (delta + 38);
}

/* Decodes a punycode identifier (RFC 3492 with "_" as its delimiter, as
 * Rust writes it: the ASCII part, then "_", then the deltas; no "_" when
 * there is no ASCII part) into p->ident as UTF-8: its length, or 0 and
 * p->err set when it is not well formed, not printable, or too long. */
static size_t puny_decode(rparse *p, const char *in, size_t n)
{
    uint32_t cps[SW_RUST_IDENT_MAX];
    size_t count = 0, i_in = 0, basic = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i] == '_')
            basic = i;   /* (the last "_") */
    if (basic || (n && in[0] == '_')) {
        for (size_t i = 0; i < basic; i++)
            cps[count++] = (unsigned char)in[i];
        i_in = basic + 1;
    }
    uint32_t cp = 0x80, bias = 72;
    uint64_t at = 0;
    int first = 1;
    while (i_in < n) {
        uint64_t before = at, w = 1;
        for (uint32_t k = 36;; k += 36) {
            if (i_in >= n)
                goto bad;
            char c = in[i_in++];
            uint32_t digit = c >= 'a' && c <= 'z' ? (uint32_t)(c - 'a')
                             : c >= '0' && c <= '9' ? (uint32_t)(c - '0' + 26)
                                                    : 36;
            if (digit == 36 || digit * w > UINT32_MAX - at)
                goto bad;
            at += digit * w;
            uint32_t t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
            if (digit < t)
                break;
            w *= 36 - t;
            if (w > UINT32_MAX)
                goto bad;
        }
        if (count >= SW_RUST_IDENT_MAX)
            goto bad;
        bias = puny_adapt((uint32_t)(at - before), (uint32_t)count + 1, first);
        first = 0;
        uint64_t next_cp = cp + at / (count + 1);
        at %= count + 1;
        if (next_cp > 0x10ffff || (next_cp >= 0xd800 && next_cp <= 0xdfff))
            goto bad;
        cp = (uint32_t)next_cp;
        memmove(cps + at + 1, cps + at, (count - (size_t)at) * sizeof cps[0]);
        cps[at] = cp;
        count++;
        at++;
    }
    size_t len = 0;
    for (size_t i = 0; i < count; i++) {
        if (cps[i] <= 0x20 || cps[i] == 0x7f || (cps[i] >= 0x80 && cps[i] < 0xa0))
            goto bad;   /* control characters and spaces are not printed */
        len += utf8_put(p->ident + len, cps[i]);
    }
    return len;
bad:
    p->err = 1;
    return 0;
}

/* <undisambiguated-identifier>: its bytes, printable ASCII only, or a
 * punycode identifier ("u" before its length) decoded to UTF-8. */
static void ident_bytes(rparse *p, const char **name, size_t *n)
{
    *name = "";
    *n = 0;
    int punycode = eat(p, 'u');
    uint64_t len = decimal(p);
    eat(p, '_');   /* (a separator before bytes that start with a digit or '_') */
    if (p->err || len > p->len - p->pos || (punycode && (len == 0 || len > SW_RUST_IDENT_MAX))) {
        p->err = 1;
        return;
    }
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p->s[p->pos + i];
        if (c <= 0x20 || c >= 0x7f) {
            p->err = 1;
            return;
        }
    }
    if (punycode) {
        *n = puny_decode(p, p->s + p->pos, (size_t)len);
        *name = p->ident;
    } else {
        *name = p->s + p->pos;
        *n = (size_t)len;
    }
    p->pos += (size_t)len;
}

/* What p printed, in a new string (NULL: no memory). */
static char *copied(const rparse *p)
{
    char *readable = malloc(p->olen + 1);
    if (readable) {
        memcpy(readable, p->out, p->olen);
        readable[p->olen] = 0;
    }
    return readable;
}

static void path(rparse *p, int in_value);
static void type(rparse *p);
static void konst(rparse *p);

/* <backref>: "B" (eaten) and a position (after "_R") before the tag, where
 * f parses; quietly, only the number. */
static void backref(rparse *p, void (*f)(rparse *, int), int arg)
{
    size_t tag = p->pos - 1;
    uint64_t at = base62(p);
    if (p->err || at >= tag) {
        p->err = 1;
        return;
    }
    if (p->quiet)
        return;
    size_t back = p->pos;
    p->pos = (size_t)at;
    f(p, arg);
    p->pos = back;
}

static void type_of(rparse *p, int unused)
{
    (void)unused;
    type(p);
}

static void konst_of(rparse *p, int unused)
{
    (void)unused;
    konst(p);
}

static void lifetime(rparse *p, uint64_t lt)
{
    put(p, "'");
    if (lt == 0) {
        put(p, "_");
        return;
    }
    if (lt > p->lifetimes) {
        p->err = 1;
        return;
    }
    uint64_t d = p->lifetimes - lt;
    if (d < 26) {
        char c = (char)('a' + d);
        put_n(p, &c, 1);
    } else {
        put(p, "_");
        put_u64(p, d);
    }
}

/* [<binder>]: "for<'a, ...> " before what f parses, its lifetimes bound there. */
static void binder(rparse *p, void (*f)(rparse *))
{
    uint64_t n = opt_base62(p, 'G'), old = p->lifetimes;
    if (n > 64) {   /* (more lifetimes than any real name binds) */
        p->err = 1;
        return;
    }
    if (n) {
        put(p, "for<");
        for (uint64_t i = 0; i < n; i++) {
            if (i)
                put(p, ", ");
            p->lifetimes++;
            lifetime(p, 1);
        }
        put(p, "> ");
    }
    f(p);
    p->lifetimes = old;
}

static void generic_arg(rparse *p)
{
    if (eat(p, 'L'))
        lifetime(p, base62(p));
    else if (eat(p, 'K'))
        konst(p);
    else
        type(p);
}

/* {<generic-arg>} "E", separated by ", ". */
static void generic_args(rparse *p)
{
    for (int i = 0; !p->err && !eat(p, 'E'); i++) {
        if (i)
            put(p, ", ");
        generic_arg(p);
    }
}

/* <path>; in_value: generic arguments after "::" (a value's path, not a type's). */
static void path(rparse *p, int in_value)
{
    if (!enter(p))
        return;
    int c = next(p);
    const char *name;
    size_t n;
    switch (c) {
    case 'C':   /* a crate root: its name (its disambiguator is not printed) */
        opt_base62(p, 's');
        ident_bytes(p, &name, &n);
        put_n(p, name, n);
        break;
    case 'M':   /* an inherent impl: <Type> */
    case 'X':   /* a trait impl: <Type as Trait> */
        opt_base62(p, 's');
        p->quiet++;
        path(p, 0);   /* (the impl's own path: not printed) */
        p->quiet--;
        /* fallthrough */
    case 'Y':   /* a trait's item: <Type as Trait> */
        put(p, "<");
        type(p);
        if (c != 'M') {
            put(p, " as ");
            path(p, 0);
        }
        put(p, ">");
        break;
    case 'N': {   /* path::name, or a closure, a shim... of it */
        int ns = next(p);
        if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) {
            p->err = 1;
            break;
        }
        path(p, in_value);
        uint64_t dis = opt_base62(p, 's');
        ident_bytes(p, &name, &n);
        if (ns >= 'A' && ns <= 'Z') {
            put(p, "::{");
            if (ns == 'C')
                put(p, "closure");
            else if (ns == 'S')
                put(p, "shim");
            else {
                char t = (char)ns;
                put_n(p, &t, 1);
            }
            if (n) {
                put(p, ":");
                put_n(p, name, n);
            }
            put(p, "#");
            put_u64(p, dis);
            put(p, "}");
        } else if (n) {
            put(p, "::");
            put_n(p, name, n);
        }
        break;
    }
    case 'I':   /* path<args> (a value's: path::<args>) */
        path(p, in_value);
        put(p, in_value ? "::<" : "<");
        generic_args(p);
        put(p, ">");
        break;
    case 'B':
        backref(p, path, in_value);
        break;
    default:
        p->err = 1;
    }
    leave(p);
}

static const char *basic_type(int c)
{
    switch (c) {
    case 'a': return "i8";
    case 'b': return "bool";
    case 'c': return "char";
    case 'd': return "f64";
    case 'e': return "str";
    case 'f': return "f32";
    case 'h': return "u8";
    case 'i': return "isize";
    case 'j': return "usize";
    case 'l': return "i32";
    case 'm': return "u32";
    case 'n': return "i128";
    case 'o': return "u128";
    case 's': return "i16";
    case 't': return "u16";
    case 'u': return "()";
    case 'v': return "...";
    case 'x': return "i64";
    case 'y': return "u64";
    case 'z': return "!";
    case 'p': return "_";
    default: return NULL;
    }
}

/* <fn-sig> after its binder: [unsafe ][extern "abi" ]fn(args)[ -> ret]. */
static void fn_sig(rparse *p)
{
    int is_unsafe = eat(p, 'U');
    const char *abi = NULL;
    size_t abi_n = 0;
    if (eat(p, 'K')) {
        if (eat(p, 'C')) {
            abi = "C";
            abi_n = 1;
        } else {
            ident_bytes(p, &abi, &abi_n);
        }
    }
    if (is_unsafe)
        put(p, "unsafe ");
    if (abi) {
        put(p, "extern \"");
        for (size_t i = 0; i < abi_n; i++)   /* (mangled with '_' for '-': "system_unwind") */
            put_n(p, abi[i] == '_' ? "-" : abi + i, 1);
        put(p, "\" ");
    }
    put(p, "fn(");
    for (int i = 0; !p->err && !eat(p, 'E'); i++) {
        if (i)
            put(p, ", ");
        type(p);
    }
    put(p, ")");
    if (!eat(p, 'u')) {
        put(p, " -> ");
        type(p);
    }
}

/* A dyn trait's path, its generic arguments left open ("Trait<A"): 1
 * when they are (its associated types' bindings go on inside). */
static int dyn_trait_path(rparse *p)
{
    if (!enter(p))
        return 0;
    int open = 0;
    if (eat(p, 'B')) {
        size_t tag = p->pos - 1;
        uint64_t at = base62(p);
        if (p->err || at >= tag) {
            p->err = 1;
        } else if (!p->quiet) {
            size_t back = p->pos;
            p->pos = (size_t)at;
            open = dyn_trait_path(p);
            p->pos = back;
        }
    } else if (eat(p, 'I')) {
        path(p, 0);
        put(p, "<");
        generic_args(p);
        open = 1;
    } else {
        path(p, 0);
    }
    leave(p);
    return open;
}

/* {<dyn-trait>} "E", separated by " + ". */
static void dyn_bounds(rparse *p)
{
    for (int i = 0; !p->err && !eat(p, 'E'); i++) {
        if (i)
            put(p, " + ");
        int open = dyn_trait_path(p);
        while (!p->err && eat(p, 'p')) {
            put(p, open ? ", " : "<");
            open = 1;
            const char *name;
            size_t n;
            ident_bytes(p, &name, &n);
            put_n(p, name, n);
            put(p, " = ");
            type(p);
        }
        if (open)
            put(p, ">");
    }
}

static void type(rparse *p)
{
    if (!enter(p))
        return;
    int c = peek(p);
    const char *basic = basic_type(c);
    if (basic) {
        p->pos++;
        put(p, basic);
        leave(p);
        return;
    }
    p->pos++;
    switch (c) {
    case 'R':
    case 'Q':
        put(p, "&");
        if (eat(p, 'L')) {
            uint64_t lt = base62(p);
            if (lt) {
                lifetime(p, lt);
                put(p, " ");
            }
        }
        if (c == 'Q')
            put(p, "mut ");
        type(p);
        break;
    case 'P':
    case 'O':
        put(p, c == 'P' ? "*const " : "*mut ");
        type(p);
        break;
    case 'A':
    case 'S':
        put(p, "[");
        type(p);
        if (c == 'A') {
            put(p, "; ");
            konst(p);
        }
        put(p, "]");
        break;
    case 'T': {
        put(p, "(");
        int i = 0;
        for (; !p->err && !eat(p, 'E'); i++) {
            if (i)
                put(p, ", ");
            type(p);
        }
        put(p, i == 1 ? ",)" : ")");
        break;
    }
    case 'F':
        binder(p, fn_sig);
        break;
    case 'D': {
        put(p, "dyn ");
        binder(p, dyn_bounds);
        if (!eat(p, 'L')) {
            p->err = 1;
            break;
        }
        uint64_t lt = base62(p);
        if (lt) {
            put(p, " + ");
            lifetime(p, lt);
        }
        break;
    }
    case 'B':
        backref(p, type_of, 0);
        break;
    default:   /* a named type: a path */
        p->pos--;
        path(p, 0);
    }
    leave(p);
}

/* A constant's hex digits up to "_" (nonempty, at most 32): as a number, or
 * 0x... over 64 bits. */
static void const_uint(rparse *p)
{
    size_t start = p->pos;
    uint64_t v = 0;
    int c;
    while ((c = next(p)) != '_') {
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 99;
        if (d == 99 || p->pos - start > 32) {
            p->err = 1;
            return;
        }
        v = (v << 4) | d;
    }
    size_t n = p->pos - 1 - start;
    if (n == 0) {
        p->err = 1;
        return;
    }
    size_t skip = 0;
    while (skip + 1 < n && p->s[start + skip] == '0')
        skip++;
    if (n - skip > 16) {
        put(p, "0x");
        put_n(p, p->s + start + skip, n - skip);
    } else {
        put_u64(p, v);
    }
}

static void konst(rparse *p)
{
    if (!enter(p))
        return;
    int c = next(p);
    switch (c) {
    case 'p':
        put(p, "_");
        break;
    case 'B':
        backref(p, konst_of, 0);
        break;
    case 'a': case 's': case 'l': case 'x': case 'n': case 'i':   /* signed */
        if (eat(p, 'n'))
            put(p, "-");
        /* fallthrough */
    case 'h': case 't': case 'm': case 'y': case 'o': case 'j':   /* unsigned */
        const_uint(p);
        break;
    case 'b':
        if (eat(p, '0') && eat(p, '_'))
            put(p, "false");
        else if (eat(p, '1') && eat(p, '_'))
            put(p, "true");
        else
            p->err = 1;
        break;
    case 'c': {   /* a char: printable ASCII only here */
        uint64_t v = 0;
        int h, nd = 0;
        while ((h = next(p)) != '_' && !p->err) {
            unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0') : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10) : 99;
            if (d == 99 || ++nd > 8) {
                p->err = 1;
                break;
            }
            v = (v << 4) | d;
        }
        if (!nd || v < 0x20 || v >= 0x7f) {
            p->err = 1;
            break;
        }
        char q[5] = {'\'', (char)v, '\'', 0, 0};
        if (v == '\'' || v == '\\') {
            q[1] = '\\';
            q[2] = (char)v;
            q[3] = '\'';
        }
        put(p, q);
        break;
    }
    default:   /* str, references, arrays, tuples, structs: not printed here */
        p->err = 1;
    }
    leave(p);
}

char *sw_demangle_rust(const char *name)
{
    if (!name || name[0] != '_' || name[1] != 'R')
        return NULL;
    size_t len = strnlen(name, SW_DEMANGLE_MAX + 1);
    if (len > SW_DEMANGLE_MAX || len < 3 || !(name[2] >= 'A' && name[2] <= 'Z'))
        return NULL;   /* (a digit there: an encoding version, none known) */
    char out[SW_DEMANGLE_OUT_MAX];   /* (then copied: most names print a hundred bytes) */
    rparse p = {.s = name + 2, .len = len - 2, .out = out};
    path(&p, 1);
    if (!p.err && peek(&p) >= 'A' && peek(&p) <= 'Z') {   /* the instantiating crate: not printed */
        p.quiet++;
        path(&p, 0);
        p.quiet--;
    }
    /* A vendor suffix (".llvm.123", a static's ".0") is left out, as
     * c++filt leaves it. */
    if (!p.err && p.pos < p.len && p.s[p.pos] != '.' && p.s[p.pos] != '$')
        p.err = 1;
    if (p.err || !p.olen)
        return NULL;
    return copied(&p);
}

/* ---- the legacy mangling: _ZN <len><bytes>... 17h<16 hex> E ---- */

/* A legacy name's escape "$...$" at t (n bytes, the dollars included): its
 * character, or 0 when it is none known. */
static char legacy_escape(const char *t, size_t n)
{
    static const struct {
        const char *code;
        char c;
    } codes[] = {{"SP", '@'}, {"BP", '*'}, {"RF", '&'}, {"LT", '<'}, {"GT", '>'}, {"LP", '('}, {"RP", ')'}, {"C", ','}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (n == strlen(codes[i].code) + 2 && memcmp(t + 1, codes[i].code, n - 2) == 0)
            return codes[i].c;
    if (n < 4 || n > 5 || t[1] != 'u')   /* $u7e$: a character by its code, ASCII here */
        return 0;
    unsigned v = 0;
    for (size_t i = 2; i + 1 < n; i++) {
        char h = t[i];
        unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0') : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10) : 99;
        if (d == 99)
            return 0;
        v = v * 16 + d;
    }
    return v >= 0x20 && v < 0x7f ? (char)v : 0;
}

/* One component of a legacy name, unescaped: "_$" at its start is "$",
 * "$LT$" '<' and the others, ".." "::". */
static void legacy_component(rparse *p, const char *t, size_t n)
{
    size_t i = n >= 2 && t[0] == '_' && t[1] == '$' ? 1 : 0;
    while (i < n && !p->err) {
        if (t[i] == '$') {
            const char *end = memchr(t + i + 1, '$', n - i - 1);
            char c = end ? legacy_escape(t + i, (size_t)(end - t) - i + 1) : 0;
            if (!c) {
                p->err = 1;
                return;
            }
            put_n(p, &c, 1);
            i = (size_t)(end - t) + 1;
        } else if (t[i] == '.' && i + 1 < n && t[i + 1] == '.') {
            put(p, "::");
            i += 2;
        } else {
            put_n(p, t + i, 1);
            i++;
        }
    }
}

static int is_hash(const char *t, size_t n)
{
    if (n != 17 || t[0] != 'h')
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
            return 0;
    return 1;
}

char *sw_demangle_rust_legacy(const char *name)
{
    if (!name || strncmp(name, "_ZN", 3) != 0)
        return NULL;
    size_t len = strnlen(name, SW_DEMANGLE_MAX + 1);
    if (len > SW_DEMANGLE_MAX)
        return NULL;
    char out[SW_DEMANGLE_OUT_MAX];
    rparse p = {.s = name + 3, .len = len - 3, .out = out};
    int parts = 0, hashed = 0;
    while (!p.err && !eat(&p, 'E')) {
        if (hashed || peek(&p) < '0' || peek(&p) > '9') {
            p.err = 1;   /* (the hash ends it; a C++ name's other parts: not Rust's) */
            break;
        }
        uint64_t n = decimal(&p);
        if (p.err || n == 0 || n > p.len - p.pos) {
            p.err = 1;
            break;
        }
        const char *t = p.s + p.pos;
        p.pos += (size_t)n;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
                p.err = 1;
        if (is_hash(t, (size_t)n) && parts) {
            hashed = 1;   /* not printed */
            continue;
        }
        if (parts++)
            put(&p, "::");
        legacy_component(&p, t, (size_t)n);
    }
    /* a hash last, then nothing or a suffix (".llvm.123": left out) */
    if (p.err || !hashed || (p.pos < p.len && p.s[p.pos] != '.') || !p.olen)
        return NULL;
    return copied(&p);
}
