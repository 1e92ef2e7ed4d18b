/*
 * it_stripe: large messages are striped over both rails in proportion to
 * the rails' weights.  Rank 0 sends 8 messages of 16 MiB to rank 1, which
 * checks every byte; then the per-rail put counters say how the payload
 * was split: rail 0's share of tx_put_bytes (sender) and rx_put_bytes
 * (receiver) must lie in [LO, HI], given on the command line because the
 * expectation depends on MADRAIL_RAIL_WEIGHTS, which the wrapper sets:
 *   it_stripe 0.30 0.70                          equal rails
 *   MADRAIL_RAIL_WEIGHTS=3,1 it_stripe 0.65 0.85  rail 0 weighted 3:1
 * With more than two rails (it_mixed.sh: three drivers) every rail's share
 * must lie in [LO, HI].
 * The total put on all rails must equal the payload exactly (no byte
 * sent twice, none by another path).
 */
#include "mdr_config.h"

#include "it_common.c"

#define NMSG 8
#define MSGSZ ((size_t)16 << 20)
#define TAG_STRIPE ((uint64_t)0x53545250ull << 32)

static int parse_frac(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || v < 0.0 || v > 1.0)
        return -1;
    *out = v;
    return 0;
}

static void check_split(it_env_t *e, const char *dir, int nrails, const uint64_t *bytes,
                        double lo, double hi)
{
    uint64_t sum = 0;
    int r;

    for (r = 0; r < nrails; r++)
        sum += bytes[r];
    for (r = 0; r < nrails; r++)
        printf("rank %d: rail %d %s_put_bytes %llu (%.1f%%)\n", e->rank, r, dir,
               (unsigned long long)bytes[r], sum ? 100.0 * (double)bytes[r] / (double)sum : 0.0);
    it_check(e, sum == (uint64_t)NMSG * MSGSZ,
             "%s_put_bytes over all rails = %llu (payload %llu)", dir,
             (unsigned long long)sum, (unsigned long long)((uint64_t)NMSG * MSGSZ));
    /* two rails: rail 0's share (weights may be unequal); more: every rail's */
    for (r = 0; sum > 0 && r < (nrails == 2 ? 1 : nrails); r++) {
        double f = (double)bytes[r] / (double)sum;
        it_check(e, f >= lo && f <= hi,
                 "rail %d carries %.1f%% of %s put bytes (expected %.0f%%..%.0f%%)", r, 100.0 * f,
                 dir, 100.0 * lo, 100.0 * hi);
    }
}

int main(int argc, char **argv)
{
    it_env_t e;
    int rc, i, r, nrails;
    double lo, hi;
    uint8_t *buf;
    uint64_t bytes[8] = {0};

    if (argc != 3 || parse_frac(argv[1], &lo) || parse_frac(argv[2], &hi) || lo > hi) {
        fprintf(stderr, "usage: %s LO HI  (rail 0's expected share of put bytes, 0..1)\n",
                argv[0]);
        return 1;
    }
    rc = it_setup(&e, "it_stripe", 2, NULL);
    if (rc != 0)
        return rc;
    nrails = madrail_rail_count(e.ctx);
    if (!it_check(&e, nrails >= 2 && nrails <= 8,
                  "context has %d rails (need 2 to 8, e.g. MADRAIL_RAILS=tcp:lo,tcp:lo)", nrails)) {
        return it_finish(&e);
    }
    for (r = 0; r < nrails; r++) {
        madrail_rail_info_t ri;
        IT_CALL(&e, madrail_rail_info(e.ctx, r, &ri));
        printf("rank %d: rail %d %s weight %.3f\n", e.rank, r, ri.name, ri.weight);
    }
    buf = it_alloc(&e, MSGSZ);
    if (e.rank == 0) {
        double t0 = it_now();
        for (i = 0; i < NMSG; i++) {
            it_fill(buf, MSGSZ, it_seed((uint64_t)i, 16, 0));
            IT_CALL(&e, madrail_send(e.ctx, e.job.peers[1], buf, MSGSZ, TAG_STRIPE | (uint64_t)i,
                                     0));
        }
        printf("rank 0: sent %d x %zu MiB in %.2f s\n", NMSG, MSGSZ >> 20, it_now() - t0);
        for (r = 0; r < nrails; r++) {
            madrail_rail_stats_t s;
            IT_CALL(&e, madrail_rail_stats(e.ctx, r, &s));
            bytes[r] = s.tx_put_bytes;
        }
        check_split(&e, "tx", nrails, bytes, lo, hi);
    } else if (e.rank == 1) {
        unsigned before = e.failures;
        for (i = 0; i < NMSG; i++) {
            madrail_info_t info;
            size_t first, bad;
            memset(buf, 0, MSGSZ);
            IT_CALL(&e, madrail_recv(e.ctx, e.job.peers[0], buf, MSGSZ, TAG_STRIPE | (uint64_t)i,
                                     MADRAIL_TAG_EXACT, &info));
            bad = it_verify(buf, MSGSZ, it_seed((uint64_t)i, 16, 0), &first);
            it_expect(&e, info.length == MSGSZ && bad == 0,
                      "message %d: length %zu, %zu bad bytes from offset %zu", i, info.length,
                      bad, first);
        }
        it_check(&e, e.failures == before, "%d messages of 16 MiB received byte-exact", NMSG);
        for (r = 0; r < nrails; r++) {
            madrail_rail_stats_t s;
            IT_CALL(&e, madrail_rail_stats(e.ctx, r, &s));
            bytes[r] = s.rx_put_bytes;
        }
        check_split(&e, "rx", nrails, bytes, lo, hi);
    }
    free(buf);
    return it_finish(&e);
}
