/*
 * records.c - the table of EXT record kinds (records.h) as data: the
 * descriptors the reader, the exporters, stats and the Python view walk,
 * the lookup by number, the payload encoder the writers use and the
 * decoder the reader uses.
 */
#include "records.h"

#include "base/base.h"

#include <string.h>

/* Each kind's fields. */
#define SW_X_FIELD_(f, type, slot)                                                                        \
    {#f, SW_FT_##type & ~(SW_FT_LATER | SW_FT_INTERNED), SW_SLOT_##slot, (SW_FT_##type & SW_FT_LATER) != 0,      \
     (SW_FT_##type & SW_FT_INTERNED) != 0},
#define SW_X_FIELDS_(K, n, name, since, from, cat, label, shape, pair, stat, title, track, ...)                   \
    static const sw_record_field fields_##K[] = {__VA_ARGS__{NULL, 0, SW_SLOT_NONE, 0, 0}};
SW_RECORD_KINDS(SW_X_FIELDS_, SW_X_FIELD_)

#define SW_X_SOURCE_WRITER "writer"
#define SW_X_SOURCE_TRACER "tracer"
#define SW_X_SOURCE_PROGRAM "program"
#define SW_X_SOURCE_DISPATCH "dispatch"
#define SW_X_SOURCE_KERNEL "kernel"
#define SW_X_SOURCE_OLDER "older"
#define SW_X_KIND_(K, n, nm, since, from, cat, label, shape, pair, stat, title, track, ...)                       \
    {n, #nm, since, SW_X_SOURCE_##from, cat, label, SW_RS_##shape, SW_RSTAT_##stat, SW_SLOT_##title,     \
     (uint8_t)(sizeof fields_##K / sizeof fields_##K[0] - 1), SW_EXT_##pair, track, fields_##K},
const sw_record_kind sw_record_kinds[] = {SW_RECORD_KINDS(SW_X_KIND_, SW_X_REC_NONE_)};
const size_t sw_record_kind_count = sizeof sw_record_kinds / sizeof sw_record_kinds[0];

/* A row's fields fit an sw_ext and its number an array of the limit's
 * size; the Python view's masks are 64 bits. */
#define SW_X_CHECK_(K, n, ...)                                                                               \
    _Static_assert(sizeof fields_##K / sizeof fields_##K[0] - 1 <= SW_RECORD_FIELDS_MAX, #K ": too many fields"); \
    _Static_assert(n > 0 && n < 64, #K ": numbers are 1..63");
SW_RECORD_KINDS(SW_X_CHECK_, SW_X_REC_NONE_)

/* Position in sw_record_kinds + 1 by number (0: unknown). */
#define SW_X_INDEX_(K, n, ...) [n] = SW_X_POS_##K + 1,
#define SW_X_POS_ENUM_(K, n, ...) SW_X_POS_##K,
enum { SW_RECORD_KINDS(SW_X_POS_ENUM_, SW_X_REC_NONE_) SW_X_POS_COUNT_ };
const uint8_t sw_record_index[SW_EXT_KIND_LIMIT] = {SW_RECORD_KINDS(SW_X_INDEX_, SW_X_REC_NONE_)};

const char *sw_record_shape_name(unsigned shape)
{
    static const char *const names[] = {"replay", "instant", "open", "close", "nest_open", "nest_close", "slice"};
    return shape < sizeof names / sizeof names[0] ? names[shape] : "?";
}

const char *sw_record_type_name(unsigned type)
{
    static const char *const names[] = {"varint", "signed", "str", "code", "tid"};
    return type < sizeof names / sizeof names[0] ? names[type] : "?";
}

const char *sw_record_slot_name(unsigned slot)
{
    static const char *const names[] = {"code", "line", "a", "b", "c", "s1", "s2", "none"};
    return slot < sizeof names / sizeof names[0] ? names[slot] : "?";
}

const char *sw_record_stat_name(unsigned stat)
{
    static const char *const names[] = {"none", "gc", "syscall", "kernel_lost", "off_cpu", "fault"};
    return stat < sizeof names / sizeof names[0] ? names[stat] : "?";
}

long sw_record_encode(uint32_t number, const sw_ext *vals, size_t str_max, uint8_t *buf, size_t cap)
{
    return sw_record_encode_interned(number, vals, str_max, NULL, NULL, buf, cap);
}

/* Encodes one field of type `type` (SW_FT_*) from its slot of vals at
 * buf + *n. Returns nonzero when it does not fit in cap bytes or cannot be
 * interned. Called with constants, from the rows (one case per kind, as
 * the decoder's: a task event's record costs half the table walk's
 * instructions). */
SW_INLINE int encode_field(const sw_ext *vals, size_t str_max, sw_intern_fn intern, void *ctx, uint8_t *buf,
                           size_t cap, size_t *n, unsigned type, unsigned slot)
{
    if (type == SW_FT_VARINT_LATER && sw_ext_number(vals, slot) == 0)
        return 0;   /* (absent: read as 0) */
    type &= ~(unsigned)SW_FT_LATER;
    if (*n + SW_VARINT_MAX > cap)
        return 1;
    if (type == SW_FT_STR || type == SW_FT_ISTR) {
        const char *s = sw_ext_string(vals, slot);
        size_t len = s ? strlen(s) : 0;
        if (len > str_max) {   /* cut on a character boundary */
            len = str_max;
            while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
                len--;
        }
        if (type == SW_FT_ISTR) {
            uint64_t id;
            if (!intern || intern(ctx, s ? s : "", len, &id) != 0)
                return 1;
            *n = (size_t)(sw_put_varint_fast(buf + *n, id) - buf);
            return 0;
        }
        *n = (size_t)(sw_put_varint_fast(buf + *n, len) - buf);
        if (*n + len > cap)
            return 1;
        if (len)
            memcpy(buf + *n, s, len);
        *n += len;
        return 0;
    }
    uint64_t v = sw_ext_number(vals, slot);
    *n = (size_t)(sw_put_varint_fast(buf + *n, type == SW_FT_SIGNED ? sw_zigzag((int64_t)v) : v) - buf);
    return 0;
}

#define SW_X_ENCODE_FIELD_(f, type, slot) &&!encode_field(vals, str_max, intern, ctx, buf, cap, &len, SW_FT_##type, SW_SLOT_##slot)
#define SW_X_ENCODE_KIND_(K, n, nm, since, from, cat, label, shape, pair, stat, title, track, ...)       \
    case n:                                                                                            \
        ok = (1 __VA_ARGS__);                                                                          \
        break;
long sw_record_encode_interned(uint32_t number, const sw_ext *vals, size_t str_max, sw_intern_fn intern, void *ctx,
                               uint8_t *buf, size_t cap)
{
    size_t len = 0;
    int ok;
    switch (number) {
        SW_RECORD_KINDS(SW_X_ENCODE_KIND_, SW_X_ENCODE_FIELD_)
    default:
        return -1;   /* no row */
    }
    return ok ? (long)len : -1;
}

/* Reads a str of an EXT payload into buf (cut at SW_EXT_STR_MAX bytes, on
 * a character boundary). */
static int get_ext_str(sw_cursor *c, char *buf)
{
    uint64_t n;
    buf[0] = 0;
    if (sw_cur_varint(c, &n) || n > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    size_t k = n > SW_EXT_STR_MAX ? SW_EXT_STR_MAX : (size_t)n;
    if (k < n)  /* do not end inside a UTF-8 sequence */
        while (k > 0 && (c->p[k] & 0xc0) == 0x80)
            k--;
    memcpy(buf, c->p, k);
    buf[k] = 0;
    c->p += n;
    return SW_OK;
}

/* Reads an interned str (the varint id of a STRINGS entry) into buf: the
 * entry, or "?" when there is none. */
static int get_ext_istr(sw_cursor *c, const sw_strings *strings, char *buf)
{
    uint64_t id;
    if (sw_cur_varint(c, &id))
        return SW_ETRUNC;
    const char *s = strings && id < strings->n && strings->s[id] ? strings->s[id] : "?";
    size_t k = strlen(s);
    if (k > SW_EXT_STR_MAX) {   /* (entries are cut at 200 bytes by the writer; one made otherwise) */
        k = SW_EXT_STR_MAX;
        while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80)
            k--;
    }
    memcpy(buf, s, k);
    buf[k] = 0;
    return SW_OK;
}

/* Decodes one field of an EXT payload, of type `type` (SW_FT_*), into its
 * slot of x (SW_SLOT_*). Returns nonzero when the payload ends first (or
 * a code id is out of range); a field a later minor appended
 * (SW_FT_LATER) may be absent: an older trace's, left 0 / "". Called with
 * constants, from the rows. */
SW_INLINE int decode_field(sw_cursor *c, const sw_strings *strings, char *s1, char *s2, sw_ext *x, unsigned type,
                           unsigned slot)
{
    if (type == SW_FT_ISTR)
        return get_ext_istr(c, strings, slot == SW_SLOT_S1 ? s1 : s2);
    if (type & SW_FT_LATER) {
        if (c->p == c->end)
            return 0;
        type &= ~(unsigned)SW_FT_LATER;
    }
    if (type == SW_FT_STR)
        return get_ext_str(c, slot == SW_SLOT_S1 ? s1 : s2);
    uint64_t v;
    if (sw_cur_varint(c, &v))
        return 1;
    if (type == SW_FT_SIGNED)
        v = (uint64_t)sw_unzigzag(v);
    switch (slot) {
    case SW_SLOT_CODE:
        if (v > SW_EXT_NO_CODE)   /* (SW_EXT_NO_CODE itself: none, format 1.14) */
            return 1;
        x->code = (uint32_t)v;
        break;
    case SW_SLOT_LINE: x->line = v; break;
    case SW_SLOT_A: x->a = v; break;
    case SW_SLOT_B: x->b = v; break;
    default: x->c = v; break;
    }
    return 0;
}

/* One case per row, made from the row (records.h sw_record_decode). */
#define SW_X_DECODE_FIELD_(f, type, slot) &&!decode_field(&c, strings, s1, s2, x, SW_FT_##type, SW_SLOT_##slot)
#define SW_X_DECODE_KIND_(K, n, nm, since, from, cat, label, shape, pair, stat, title, track, ...)       \
    case n:                                                                                            \
        bad = !(1 __VA_ARGS__);                                                                        \
        break;
void sw_record_decode(uint32_t kind, const uint8_t *p, size_t len, const sw_strings *strings, char *s1, char *s2,
                      sw_ext *x)
{
    memset(x, 0, sizeof *x);
    sw_cursor c = {p, p + len};
    x->kind = kind;
    x->code = SW_EXT_NO_CODE;
    s1[0] = s2[0] = 0;
    x->s1 = s1;
    x->s2 = s2;
    int bad = 0;
    switch (kind) {
        SW_RECORD_KINDS(SW_X_DECODE_KIND_, SW_X_DECODE_FIELD_)
    default:
        break;
    }
    x->malformed = bad != 0;
}
