#include "log/crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

/* Slicing-by-8 tables: table[0] is the classic byte-at-a-time table. */
static uint32_t crc_table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&table_once, build_tables);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t v = load_le64(p) ^ c;
        c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
            crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
            crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
            crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__)
/* a(x) * b(x) modulo the polynomial, both in the reflected bit order of the
 * CRC register (bit 31 is x^0). Bit-serial: only a few calls per stripe. */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ CRC32C_POLY_REFLECTED : b >> 1;
    }
    return p;
}

/* Three streams of STRIPE bytes each run in parallel: the crc32 instruction
 * has a latency of 3 cycles and a throughput of 1, so one dependent chain
 * uses a third of it (9.5 GB/s on this machine's CPU, 25 GB/s with three).
 * The registers are then joined by shifting the first two past the bytes
 * after them: a register advanced over n zero bytes is multiplied by
 * x^(8n) mod P. The two constants are x^(8 * STRIPE) and x^(16 * STRIPE)
 * mod P (reflected), computed by squaring x as zlib's crc32_combine does;
 * test_log_segment's crc32c_hw_equals_sw checks lengths past 3 stripes. */
#define CRC_STRIPE 8192
#define CRC_SHIFT_1 0x28461564u /* x^(8 * 8192) mod P */
#define CRC_SHIFT_2 0xBF455269u /* x^(16 * 8192) mod P */

/* Shorter data (a checkpoint's records of a few hundred bytes, whose CRC is
 * most of a checkpoint's CPU) runs three streams of 64-byte stripes. There
 * the bit-serial multmodp would cost more than the stripes save, so the two
 * shifts are linear maps applied a byte at a time from tables: small_shift[s]
 * [k][b] is b << 8k advanced over (s + 1) * 64 zero bytes. */
#define CRC_SMALL_STRIPE 64
static uint32_t small_shift[2][4][256];

/* x^(8 * 2^log2n) mod P (reflected: x^0 is bit 31), by squaring x^8. */
static uint32_t x8n_mod_p(unsigned log2n)
{
    uint32_t p = 1u << (31 - 8); /* x^8 */
    for (unsigned i = 0; i < log2n; i++) p = multmodp(p, p);
    return p;
}

static void build_small_shift(void)
{
    uint32_t x[2] = {x8n_mod_p(6), x8n_mod_p(7)}; /* 64 and 128 bytes */
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++)
            for (uint32_t b = 0; b < 256; b++) small_shift[s][k][b] = multmodp(x[s], b << (8 * k));
}

static inline uint32_t small_shift_by(int s, uint32_t c)
{
    return small_shift[s][0][c & 0xff] ^ small_shift[s][1][(c >> 8) & 0xff] ^
           small_shift[s][2][(c >> 16) & 0xff] ^ small_shift[s][3][c >> 24];
}

/* Advance c, c1, c2 over three consecutive stripes of `stripe` bytes at p
 * (c1 and c2 start at 0; the caller joins them). */
__attribute__((target("sse4.2"))) static inline void crc_three_stripes(uint64_t *c, uint64_t *c1,
                                                                       uint64_t *c2,
                                                                       const unsigned char *p,
                                                                       size_t stripe)
{
    uint64_t a = *c, b = 0, d = 0;
    for (const unsigned char *end = p + stripe; p < end; p += 8) {
        uint64_t v0, v1, v2;
        memcpy(&v0, p, 8);
        memcpy(&v1, p + stripe, 8);
        memcpy(&v2, p + 2 * stripe, 8);
        a = __builtin_ia32_crc32di(a, v0);
        b = __builtin_ia32_crc32di(b, v1);
        d = __builtin_ia32_crc32di(d, v2);
    }
    *c = a;
    *c1 = b;
    *c2 = d;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *buf,
                                                               size_t len)
{
    /* Three stripes at a time while 24 KiB are left (above), then three
     * 64-byte stripes while 192 bytes are left, then unaligned 8-byte steps
     * (no byte-wise lead-in to an alignment: log records start anywhere, and
     * the crc32 instruction's 3-cycle latency per step is the cost), then at
     * most a 4-, a 2- and a 1-byte step. */
    const unsigned char *p = buf;
    uint64_t c = (uint32_t)~crc;
    for (; len >= 3 * CRC_STRIPE; len -= 3 * CRC_STRIPE) {
        uint64_t c1, c2;
        crc_three_stripes(&c, &c1, &c2, p, CRC_STRIPE);
        c = multmodp(CRC_SHIFT_2, (uint32_t)c) ^ multmodp(CRC_SHIFT_1, (uint32_t)c1) ^ c2;
        p += 3 * CRC_STRIPE;
    }
    for (; len >= 3 * CRC_SMALL_STRIPE; len -= 3 * CRC_SMALL_STRIPE) {
        uint64_t c1, c2;
        crc_three_stripes(&c, &c1, &c2, p, CRC_SMALL_STRIPE);
        c = small_shift_by(1, (uint32_t)c) ^ small_shift_by(0, (uint32_t)c1) ^ c2;
        p += 3 * CRC_SMALL_STRIPE;
    }
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    if (len & 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        c32 = __builtin_ia32_crc32si(c32, v);
        p += 4;
    }
    if (len & 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        c32 = __builtin_ia32_crc32hi(c32, v);
        p += 2;
    }
    if (len & 1) c32 = __builtin_ia32_crc32qi(c32, *p);
    return ~c32;
}

/* 0 unknown, 1 no, 2 yes (published after small_shift is built) */
static atomic_int hw_state;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void detect_hw(void)
{
    __builtin_cpu_init();
    bool yes = __builtin_cpu_supports("sse4.2");
    if (yes) build_small_shift();
    atomic_store_explicit(&hw_state, yes ? 2 : 1, memory_order_release);
}

bool crc32c_hw_available(void)
{
    int s = atomic_load_explicit(&hw_state, memory_order_acquire);
    if (s == 0) {
        pthread_once(&hw_once, detect_hw);
        s = atomic_load_explicit(&hw_state, memory_order_acquire);
    }
    return s == 2;
}

uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
    return crc32c_hw_available() ? crc32c_sse42(crc, buf, len) : crc32c_sw(crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
    return crc32c_hw_available() ? crc32c_sse42(crc, buf, len) : crc32c_sw(crc, buf, len);
}
#else
bool crc32c_hw_available(void) { return false; }
uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len) { return crc32c_sw(crc, buf, len); }
uint32_t crc32c(uint32_t crc, const void *buf, size_t len) { return crc32c_sw(crc, buf, len); }
#endif
