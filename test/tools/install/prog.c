/*
 * A program built against an installed libmadrail, as a user builds one
 * (test/tools/install.sh: once with pkg-config, once with CMake's
 * find_package(madrail)).  Only the installed header and library: two
 * contexts in this process on one loop rail, a message of each protocol
 * size (eager, rendezvous) from the first to the second, every byte
 * checked.  Prints the library version and "install-prog: ok".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <madrail.h>

#define CHECK(_call)                                                                            \
    do {                                                                                        \
        madrail_status_t _st = (_call);                                                         \
        if (_st != MADRAIL_OK) {                                                                \
            fprintf(stderr, "install-prog: %s: %s\n", #_call, madrail_status_str(_st));        \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

static int transfer(madrail_context_t a, madrail_context_t b, madrail_peer_t to_b,
                    madrail_peer_t from_a, size_t len, uint64_t tag)
{
    unsigned char *src = malloc(len), *dst = malloc(len);
    madrail_request_t sreq, rreq;
    madrail_info_t info;
    int sdone = 0, rdone = 0, spins = 0;
    size_t i;

    if (!src || !dst)
        return 1;
    for (i = 0; i < len; i++)
        src[i] = (unsigned char)(i * 7 + tag);
    memset(dst, 0, len);
    CHECK(madrail_irecv(b, from_a, dst, len, tag, MADRAIL_TAG_EXACT, &rreq));
    CHECK(madrail_isend(a, to_b, src, len, tag, 0, &sreq));
    while (!sdone || !rdone) {
        madrail_progress(a);
        madrail_progress(b);
        if (!sdone)
            CHECK(madrail_test(&sreq, &sdone, NULL));
        if (!rdone)
            CHECK(madrail_test(&rreq, &rdone, &info));
        if (++spins > 10000000) {
            fprintf(stderr, "install-prog: %zu bytes never arrived\n", len);
            return 1;
        }
    }
    if (info.length != len || memcmp(src, dst, len) != 0) {
        fprintf(stderr, "install-prog: %zu bytes: received %zu, contents differ\n", len,
                info.length);
        return 1;
    }
    free(src);
    free(dst);
    return 0;
}

int main(void)
{
    static const char *const ov[] = {"MADRAIL_RAILS=loop:install", NULL};
    madrail_context_params_t params = {ov};
    madrail_context_t a, b;
    madrail_peer_t to_b, from_a;
    char addr_a[MADRAIL_ADDR_MAX], addr_b[MADRAIL_ADDR_MAX];
    size_t la = sizeof(addr_a), lb = sizeof(addr_b);

    printf("libmadrail %s, header %d.%d\n", madrail_version(), MADRAIL_VERSION_MAJOR,
           MADRAIL_VERSION_MINOR);
    uint8_t key[MADRAIL_JOB_KEY_LEN];

    CHECK(madrail_context_init(&params, &a));
    CHECK(madrail_context_init(&params, &b));
    /* two contexts connected by hand share one job key (docs/security.md) */
    CHECK(madrail_context_job_key(a, key, NULL));
    CHECK(madrail_context_set_job_key(b, key, sizeof(key)));
    if (madrail_rail_count(a) != 1 || madrail_rail_count(b) != 1) {
        fprintf(stderr, "install-prog: %d and %d rails, want 1\n", madrail_rail_count(a),
                madrail_rail_count(b));
        return 1;
    }
    CHECK(madrail_context_address(a, addr_a, &la));
    CHECK(madrail_context_address(b, addr_b, &lb));
    CHECK(madrail_peer_add(a, addr_b, lb, &to_b));
    CHECK(madrail_peer_add(b, addr_a, la, &from_a));
    if (transfer(a, b, to_b, from_a, 100, 1) || transfer(a, b, to_b, from_a, 1u << 20, 2))
        return 1;
    CHECK(madrail_context_finalize(a));
    CHECK(madrail_context_finalize(b));
    printf("install-prog: ok\n");
    return 0;
}
