/*
 * it_adapt: how rank 0's large messages to rank 1 split over the rails,
 * phase by phase, while the rails' speeds may change between phases.
 * Written for any rails (tcp on loopback in make check, the namespace
 * cluster with tc rates in test/cluster), so the split is checked as
 * shares of put bytes, never as a time.
 *
 *   it_adapt [--size S] [--window W] [--report N] [--between CMD] [--csv FILE]
 *            PHASE...
 *   PHASE = N[:LO:HI]  N messages; rail 0's share of the put bytes of the
 *                      last third of them (at least 4) must lie in [LO, HI]
 *                      (0..1; without LO:HI the share is only printed)
 *   --size S        message size (default 1m; k/m suffixes)
 *   --window W      messages in flight (default 8)
 *   --report N      one line every N messages (default 8)
 *   --between CMD   rank 0 runs CMD through sh before every phase but the
 *                   first, with the rails idle (every message of the
 *                   previous phase delivered); "%d" in CMD becomes the
 *                   phase number (1-based); a non-zero exit fails the test.
 *                   On the cluster: a tc rate change.
 *   --csv FILE      rank 0 writes one row per report line: time, phase,
 *                   messages, MB/s, then per rail its share of the put
 *                   bytes, measured MB/s and stripe weight share
 *
 * Each line printed by rank 0 gives the time since the start, the rate of
 * those messages, each rail's share of their put bytes and what
 * adaptation measured (madrail_peer_rail_health).  Rank 1 checks every
 * byte.
 *
 * On the namespace cluster (test/cluster/cluster.sh), e.g. rails of
 * 1 Gbit and 300 Mbit, then rail 1 cut to 100 Mbit between the phases (a
 * share is expected near the rates' ratio: 1000/1300 = 77%, then
 * 1000/1100 = 91%; tbf framing overhead shifts it a little):
 *   cluster.sh up --rate 1gbit,300mbit
 *   cluster.sh exec 0 env MADRAIL_RAILS=tcp:rail0,tcp:rail1  *       mpiexec -f HOSTS -n 2 -ppn 1 it_adapt  *       --between 'cluster.sh rate 1 100mbit' 64:0.72:0.82 64:0.86:0.95
 */
#include "mdr_config.h"

#include "it_common.c"

#define TAG_ADAPT ((uint64_t)0x41445054ull << 32)
#define MAX_PHASES 16
#define MAX_RAILS 8

typedef struct {
    int n;
    int checked;
    double lo, hi;
} phase_t;

typedef struct {
    size_t size;
    int window, report;
    const char *between, *csv;
    int nphases;
    phase_t ph[MAX_PHASES];
} opts_t;

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    if (*end == 'k' || *end == 'K')
        v *= 1024, end++;
    else if (*end == 'm' || *end == 'M')
        v *= 1024 * 1024, end++;
    if (*end != '\0')
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_phase(const char *s, phase_t *p)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || n < 1 || n > 1000000)
        return -1;
    p->n = (int)n;
    p->checked = 0;
    if (*end == '\0')
        return 0;
    if (*end != ':')
        return -1;
    p->lo = strtod(end + 1, &end);
    if (*end != ':')
        return -1;
    p->hi = strtod(end + 1, &end);
    if (*end != '\0' || p->lo < 0 || p->hi > 1 || p->lo > p->hi)
        return -1;
    p->checked = 1;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    int i;

    memset(o, 0, sizeof(*o));
    o->size = 1024 * 1024;
    o->window = 8;
    o->report = 8;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--size") == 0 && i + 1 < argc) {
            if (parse_size(argv[++i], &o->size) != 0)
                return -1;
        } else if (strcmp(a, "--window") == 0 && i + 1 < argc) {
            o->window = atoi(argv[++i]);
            if (o->window < 1 || o->window > 256)
                return -1;
        } else if (strcmp(a, "--report") == 0 && i + 1 < argc) {
            o->report = atoi(argv[++i]);
            if (o->report < 1)
                return -1;
        } else if (strcmp(a, "--between") == 0 && i + 1 < argc) {
            o->between = argv[++i];
        } else if (strcmp(a, "--csv") == 0 && i + 1 < argc) {
            o->csv = argv[++i];
        } else if (a[0] == '-') {
            return -1;
        } else {
            if (o->nphases == MAX_PHASES || parse_phase(a, &o->ph[o->nphases]) != 0)
                return -1;
            o->nphases++;
        }
    }
    return o->nphases > 0 ? 0 : -1;
}

static void put_bytes(it_env_t *e, int nrails, uint64_t *b)
{
    int r;
    for (r = 0; r < nrails; r++) {
        madrail_rail_stats_t s;
        IT_CALL(e, madrail_rail_stats(e->ctx, r, &s));
        b[r] = s.tx_put_bytes;
    }
}

/* rail 0's share of the put bytes between two snapshots */
static double share0(int nrails, const uint64_t *a, const uint64_t *b)
{
    uint64_t sum = 0;
    int r;
    for (r = 0; r < nrails; r++)
        sum += b[r] - a[r];
    return sum ? (double)(b[0] - a[0]) / (double)sum : 0.0;
}

static void report(it_env_t *e, const opts_t *o, FILE *csv, int nrails, int phase, int msgs,
                   double t0, double t, double dt, const uint64_t *a, const uint64_t *b)
{
    char line[1024];
    size_t off = 0;
    uint64_t sum = 0;
    int r;

    for (r = 0; r < nrails; r++)
        sum += b[r] - a[r];
    off += (size_t)snprintf(line + off, sizeof(line) - off,
                            "rank 0: t %7.3f s phase %d msgs %5d: %8.1f MB/s |", t - t0, phase,
                            msgs, dt > 0 ? (double)sum / dt / 1e6 : 0.0);
    if (csv)
        fprintf(csv, "%.4f,%d,%d,%.2f", t - t0, phase, msgs,
                dt > 0 ? (double)sum / dt / 1e6 : 0.0);
    for (r = 0; r < nrails && off < sizeof(line); r++) {
        madrail_rail_health_t h;
        double s = sum ? (double)(b[r] - a[r]) / (double)sum : 0.0;
        IT_CALL(e, madrail_peer_rail_health(e->ctx, e->job.peers[1], r, &h));
        off += (size_t)snprintf(line + off, sizeof(line) - off,
                                " rail %d %5.1f%% (measured %.1f MB/s, weight %.1f%%%s)", r,
                                100 * s, h.measured_mbs, 100 * h.share,
                                h.measured ? "" : " static");
        if (csv)
            fprintf(csv, ",%.4f,%.2f,%.4f", s, h.measured_mbs, h.share);
    }
    printf("%s\n", line);
    if (csv)
        fprintf(csv, "\n");
    (void)o;
}

static int run_between(it_env_t *e, const char *cmd, int phase)
{
    char buf[4096];
    const char *p;
    size_t off = 0;
    int rc;

    for (p = cmd; *p && off + 16 < sizeof(buf); p++) {
        if (p[0] == '%' && p[1] == 'd') {
            off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%d", phase);
            p++;
        } else {
            buf[off++] = *p;
        }
    }
    buf[off] = '\0';
    printf("rank 0: before phase %d: %s\n", phase, buf);
    fflush(stdout);
    rc = system(buf);
    return it_check(e, rc == 0, "between phases: '%s' exited with %d", buf, rc);
}

/* Wait for a request while progressing. */
static void wait_req(it_env_t *e, madrail_request_t *r, madrail_info_t *info)
{
    int flag = 0;
    while (*r) {
        madrail_status_t st = madrail_test(r, &flag, info);
        if (st != MADRAIL_OK)
            it_die(e, "madrail_test", st);
        if (!flag)
            madrail_progress(e->ctx);
    }
}

static void sender(it_env_t *e, const opts_t *o, uint8_t *bufs)
{
    madrail_request_t req[256];
    uint64_t start[MAX_RAILS], last[MAX_RAILS], now_b[MAX_RAILS], meas[MAX_RAILS];
    int nrails = madrail_rail_count(e->ctx), p, i, k, seq = 0;
    double t0 = it_now(), tl;
    FILE *csv = NULL;

    if (nrails > MAX_RAILS)
        nrails = MAX_RAILS;
    if (o->csv) {
        csv = fopen(o->csv, "w");
        if (!csv)
            it_check(e, 0, "cannot write %s", o->csv);
        else {
            fprintf(csv, "time_s,phase,messages,mbs");
            for (k = 0; k < nrails; k++)
                fprintf(csv, ",rail%d_share,rail%d_measured_mbs,rail%d_weight_share", k, k, k);
            fprintf(csv, "\n");
        }
    }
    memset(req, 0, sizeof(req));
    for (p = 0; p < o->nphases; p++) {
        const phase_t *ph = &o->ph[p];
        int measure_from = ph->n - (ph->n / 3 > 4 ? ph->n / 3 : 4);

        if (measure_from < 0)
            measure_from = 0;
        if (p > 0 && o->between)
            run_between(e, o->between, p + 1);
        put_bytes(e, nrails, start);
        memcpy(last, start, sizeof(last));
        memcpy(meas, start, sizeof(meas));
        tl = it_now();
        for (i = 0; i < ph->n; i++, seq++) {
            k = seq % o->window;
            if (req[k])
                wait_req(e, &req[k], NULL);
            if (i == measure_from)
                put_bytes(e, nrails, meas);
            IT_CALL(e, madrail_isend(e->ctx, e->job.peers[1], bufs + (size_t)k * o->size, o->size,
                                     TAG_ADAPT | (uint64_t)seq, 0, &req[k]));
            if ((i + 1) % o->report == 0 || i + 1 == ph->n) {
                double t = it_now();
                put_bytes(e, nrails, now_b);
                report(e, o, csv, nrails, p + 1, i + 1, t0, t, t - tl, last, now_b);
                memcpy(last, now_b, sizeof(last));
                tl = t;
            }
        }
        /* the phase ends with its messages delivered: the next phase's
         * command then changes idle rails */
        for (k = 0; k < o->window; k++)
            if (req[k])
                wait_req(e, &req[k], NULL);
        {
            /* what the last messages' puts carried (planned at isend or at
             * the CTS: all of them are out once the sends completed) */
            double f;
            put_bytes(e, nrails, now_b);
            f = share0(nrails, meas, now_b);
            if (ph->checked)
                it_check(e, f >= ph->lo && f <= ph->hi,
                         "phase %d: rail 0 carried %.1f%% of the put bytes of its last %d "
                         "messages (expected %.0f%%..%.0f%%)",
                         p + 1, 100 * f, ph->n - measure_from, 100 * ph->lo, 100 * ph->hi);
            else
                printf("rank 0: phase %d: rail 0 carried %.1f%% of the put bytes of its last %d "
                       "messages\n",
                       p + 1, 100 * f, ph->n - measure_from);
        }
        /* rank 1 answers once it received the phase: the rails are idle */
        {
            uint8_t ack = 0;
            IT_CALL(e, madrail_recv(e->ctx, e->job.peers[1], &ack, 1, TAG_ADAPT | 0xffffffffull,
                                    MADRAIL_TAG_EXACT, NULL));
        }
    }
    if (csv)
        fclose(csv);
}

static void receiver(it_env_t *e, const opts_t *o, uint8_t *bufs)
{
    madrail_request_t req[256];
    int p, i, k, seq = 0, posted = 0, total = 0;
    unsigned before = e->failures;

    memset(req, 0, sizeof(req));
    for (p = 0; p < o->nphases; p++) {
        int end = total + o->ph[p].n;
        total = end;
        while (seq < end) {
            while (posted < end && posted - seq < o->window) {
                k = posted % o->window;
                IT_CALL(e, madrail_irecv(e->ctx, e->job.peers[0], bufs + (size_t)k * o->size,
                                         o->size, TAG_ADAPT | (uint64_t)posted, MADRAIL_TAG_EXACT,
                                         &req[k]));
                posted++;
            }
            k = seq % o->window;
            {
                madrail_info_t info;
                size_t first, bad;
                wait_req(e, &req[k], &info);
                bad = it_verify(bufs + (size_t)k * o->size, o->size,
                                it_seed((uint64_t)k, o->size, 0), &first);
                it_expect(e, info.length == o->size && bad == 0,
                          "message %d: length %zu, %zu bad bytes from offset %zu", seq,
                          info.length, bad, first);
                /* the next message in this slot carries the same pattern */
                memset(bufs + (size_t)k * o->size, 0, o->size);
            }
            seq++;
        }
        {
            uint8_t ack = 1;
            IT_CALL(e, madrail_send(e->ctx, e->job.peers[0], &ack, 1, TAG_ADAPT | 0xffffffffull,
                                    0));
        }
    }
    for (i = 0; i < o->window; i++)
        if (req[i])
            wait_req(e, &req[i], NULL);
    it_check(e, e->failures == before, "%d messages of %zu bytes received byte-exact", seq,
             o->size);
}

int main(int argc, char **argv)
{
    it_env_t e;
    opts_t o;
    int rc, k;
    uint8_t *bufs;

    if (parse_args(argc, argv, &o) != 0) {
        fprintf(stderr,
                "usage: %s [--size S] [--window W] [--report N] [--between CMD] [--csv FILE] "
                "N[:LO:HI]...\n",
                argv[0]);
        return 1;
    }
    rc = it_setup(&e, "it_adapt", 2, NULL);
    if (rc != 0)
        return rc;
    if (e.rank == 0) {
        int r, n = madrail_rail_count(e.ctx);
        for (r = 0; r < n; r++) {
            madrail_rail_info_t ri;
            IT_CALL(&e, madrail_rail_info(e.ctx, r, &ri));
            printf("rank 0: rail %d %s profile %.0f MB/s static weight %.3f\n", r, ri.name,
                   ri.bandwidth_mbs, ri.weight);
        }
    }
    bufs = it_alloc(&e, o.size * (size_t)o.window);
    if (e.rank == 0) {
        for (k = 0; k < o.window; k++)
            it_fill(bufs + (size_t)k * o.size, o.size, it_seed((uint64_t)k, o.size, 0));
        sender(&e, &o, bufs);
    } else if (e.rank == 1) {
        receiver(&e, &o, bufs);
    }
    free(bufs);
    return it_finish(&e);
}
