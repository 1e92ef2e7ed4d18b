/*
 * What the fuzz targets share: a cursor over the fuzz input (reads past its
 * end give zeros, so every input is a valid program), a deterministic
 * getrandom() (uuids and segment tags come from it: a crasher must replay
 * the same way), and a fixed-address arena for put targets (an input can
 * then name a registered address without knowing where malloc put it).
 *
 * Header-only on purpose: each fuzz_<target> is one .c file plus this, and
 * the seed generator (gen_seeds.c) includes the same layouts through the
 * targets' own headers, never through copies.
 */
#ifndef MDR_FUZZ_COMMON_H
#define MDR_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The job key every harness's rails share (issue 9: a rail refuses a
 * handshake without it).  Seeds that should get past the handshake carry
 * it; the fuzzer may change it, which exercises the refusal path. */
static const uint8_t fz_job_key[16] __attribute__((unused)) = {
    'm', 'a', 'd', 'r', 'a', 'i', 'l', '-', 'f', 'u', 'z', 'z', '-', 'k', 'e', 'y'};
#include <sys/types.h>

/* The entry point libFuzzer calls (declared here for -Wmissing-prototypes). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in_t;

static inline size_t fz_left(const fz_in_t *in) { return in->n; }

/* Copy len bytes out of the input; what the input lacks reads as zero. */
static inline void fz_bytes(fz_in_t *in, void *dst, size_t len)
{
    size_t take = len < in->n ? len : in->n;

    if (take > 0)
        memcpy(dst, in->p, take);
    if (take < len)
        memset((uint8_t *)dst + take, 0, len - take);
    in->p += take;
    in->n -= take;
}

static inline uint8_t fz_u8(fz_in_t *in)
{
    uint8_t v;
    fz_bytes(in, &v, 1);
    return v;
}

static inline uint16_t fz_u16(fz_in_t *in)
{
    uint16_t v;
    fz_bytes(in, &v, 2);
    return v;
}

static inline uint32_t fz_u32(fz_in_t *in)
{
    uint32_t v;
    fz_bytes(in, &v, 4);
    return v;
}

static inline uint64_t fz_u64(fz_in_t *in)
{
    uint64_t v;
    fz_bytes(in, &v, 8);
    return v;
}

/* ---- process setup ---- */

/* Libraries linked in with the ucx and ofi drivers install handlers for
 * SIGSEGV, SIGILL, SIGBUS and SIGFPE when they are loaded, before main:
 * libucs (UCX) and libinfinipath (libfabric's psm provider) print their
 * own backtrace and exit, so libFuzzer and the sanitizers would never see
 * the crash.  Their environment variables stop that, but only when set
 * before the process starts: when they are not, start again with them. */
static inline void fz_env_setup(char **argv)
{
    if (getenv("FZ_ENV_SET") == NULL) {
        setenv("FZ_ENV_SET", "1", 1);
        setenv("UCX_ERROR_SIGNALS", "", 1);
        setenv("UCX_HANDLE_ERRORS", "none", 1);
        setenv("IPATH_NO_BACKTRACE", "1", 1);
        execv("/proc/self/exe", argv);
        /* could not: carry on, crashes are then reported as exits */
    }
}

/* Leaks inside third-party libraries are not ours to fix; the ones seen:
 * libfabric 1.17's rxm keeps a connection (336 + 40 bytes) made when only
 * one side of a pair ever sent, past fi_close of the endpoint (nothing of
 * madrail's is called back from libfabric, so this hides nothing of ours);
 * UCX 1.13 keeps the ucp_eps it makes for wireup (an incoming connection,
 * an endpoint closing in the background) in pointer maps LeakSanitizer
 * cannot read (freed with the worker; the fast unwinder stops in libucs,
 * so the patterns are UCX's allocators).  madrail's own
 * allocations under libucp (the active-message handler) stay checked. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libfabric.so\nleak:ucs_calloc\nleak:ucs_malloc\n";
}

/* ---- deterministic randomness ---- */

extern uint64_t fz_rand_state;

/* Start every input from the same state. */
static inline void fz_rand_reset(void) { fz_rand_state = 0x9e3779b97f4a7c15ull; }

/* The library's getrandom() calls land here (the executable's definition
 * interposes libc's): splitmix64, never short, never failing. */
#define FZ_DEFINE_GETRANDOM                                                                  \
    uint64_t fz_rand_state = 0x9e3779b97f4a7c15ull;                                          \
    ssize_t getrandom(void *buf, size_t len, unsigned int flags);                            \
    ssize_t getrandom(void *buf, size_t len, unsigned int flags)                             \
    {                                                                                        \
        uint8_t *b = buf;                                                                    \
        size_t i;                                                                            \
        (void)flags;                                                                         \
        for (i = 0; i < len; i++) {                                                          \
            uint64_t z;                                                                      \
            if ((i & 7) == 0)                                                                \
                fz_rand_state += 0x9e3779b97f4a7c15ull;                                      \
            z = fz_rand_state;                                                               \
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;                                     \
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;                                     \
            z ^= z >> 31;                                                                    \
            b[i] = (uint8_t)(z >> (8 * (i & 7)));                                            \
        }                                                                                    \
        return (ssize_t)len;                                                                 \
    }

/* ---- put targets at a fixed address ---- */

/* In the low application range of x86_64 ASan's layout (below its shadow),
 * unused by a PIE executable, its heap and its libraries. */
#define FZ_ARENA_ADDR ((uintptr_t)0x40000000u)
#define FZ_ARENA_LEN ((size_t)1 << 20)

/* Map the arena (once per process); its address is FZ_ARENA_ADDR when the
 * kernel allows, else wherever (inputs then miss it, nothing breaks). */
static inline uint8_t *fz_arena(void)
{
    static uint8_t *arena;

    if (arena == NULL) {
        void *p = mmap((void *)FZ_ARENA_ADDR, FZ_ARENA_LEN, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            p = mmap(NULL, FZ_ARENA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
        arena = p == MAP_FAILED ? NULL : p;
    }
    return arena;
}

#endif /* MDR_FUZZ_COMMON_H */
