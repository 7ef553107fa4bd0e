/*
 * demangle_rust.h - Rust symbol names of the v0 mangling ("_R...",
 * rustc -C symbol-mangling-version=v0, and the standard library's own
 * since Rust 1.9x) made readable, as rustc-demangle's alternate form
 * prints them: c++filt's text without the crates' disambiguators
 * ("core::cell::OnceCell<u8>", where c++filt prints
 * "core[c1f1a4ba060b9bfa]::cell::OnceCell<u8>") and without the type
 * of constants ("[u8; 4]", where c++filt prints "[u8; 4: usize]"); a
 * vendor suffix (".llvm.123", ".0") is left out, as c++filt does.
 *
 * Written here from the mangling's specification (RFC 2603 and the
 * Rust reference's "v0 Symbol Format"); demangle.h's sw_demangle hands
 * it every "_R" name, and every "_Z" one first to sw_demangle_rust_legacy
 * (the mangling before v0, still rustc's default before 1.9x: C++'s
 * nested names with "$LT$"-style escapes and a hash part last).
 *
 * Bounded: names of at most SW_DEMANGLE_MAX bytes, nesting (paths and
 * back-references followed) at most SW_RUST_DEMANGLE_DEPTH deep, output
 * at most SW_DEMANGLE_OUT_MAX bytes, at most SW_RUST_DEMANGLE_STEPS
 * steps of the parser (back-references can print a part many times).
 * Punycode identifiers (non-ASCII names) are decoded to UTF-8, at most
 * SW_RUST_IDENT_MAX code points each. What it does not print (constants
 * of str, reference, array, tuple and struct types; an encoding version)
 * leaves the name mangled.
 */
#ifndef SW_DEMANGLE_RUST_H
#define SW_DEMANGLE_RUST_H

#define SW_RUST_DEMANGLE_DEPTH 128
#define SW_RUST_DEMANGLE_STEPS 200000u
#define SW_RUST_IDENT_MAX 256u

/* Stack sw_demangle asks to be left for it (else the name stays
 * mangled): the output, SW_DEMANGLE_OUT_MAX bytes, is built on the stack,
 * and the recursion nests SW_RUST_DEMANGLE_DEPTH levels of about 100
 * bytes. */
#define SW_RUST_DEMANGLE_STACK (64u * 1024u)

/* The readable form of a legacy Rust name ("_ZN" parts "17h" 16 hex
 * digits "E", an optional suffix), as c++filt prints it less the hash
 * part: "<&mut serde_json::ser::Serializer<W,F> as
 * serde_core::ser::Serializer>::serialize_str" (escapes "$LT$", "$u20$",
 * ".." undone); NULL when name is none (a C++ name: libstdc++'s) or is
 * malformed (an unknown escape), or over the bounds above. Same promises
 * as sw_demangle_rust. */
char *sw_demangle_rust_legacy(const char *name);

/* The readable form of a v0 Rust name ("_R..."), in a new string for the
 * caller to free; NULL (nothing allocated) when name is no such name, is
 * malformed or out of the bounds above, or memory runs out. Any bytes
 * are safe; reads name only up to its NUL or SW_DEMANGLE_MAX + 1 bytes.
 * Thread-safe, no global state; not for signal handlers (malloc). */
char *sw_demangle_rust(const char *name);

#endif
