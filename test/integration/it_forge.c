/*
 * A forged FIN on a tcp rail of a running 2-rank job (issue 9, item 2).
 *
 * Rank 0 posts a 100,000-byte receive from rank 1, which offers its buffer
 * to rank 1 (receiver-first), and publishes the address of its first tcp
 * rail, its uuid and the receive's id in DIR/victim.  it_forge_client, a
 * process outside the job with no libmadrail, connects to that rail, does
 * the tcp handshake under a uuid of its own and sends a FIN for that
 * receive claiming all 100,000 bytes.  Before the fix the FIN counted: the
 * receive then completed as soon as rank 1's envelope arrived, before
 * rank 1's bytes.  Now rank 0 must close that connection's rail for the
 * stranger, leave the receive untouched, and then get rank 1's data
 * byte-exact; other traffic in both directions still flows.
 *
 * The client then claims rank 1's uuid in a handshake with the key but
 * without rank 1's session secret (issue 28, finding 2: before, that
 * replaced rank 0's connection to rank 1, the core restarted rank 1's
 * counters, and rank 1's re-sent messages killed the job).  Rank 0 must
 * refuse it, keep its rails to rank 1 up (no reconnection counted), and
 * the job goes on byte-exact.
 *
 * This program looks inside the library (the receive's id, the rail's
 * address, which rails are closed), so it links the internal library.
 */
#include "it_common.c"

#include <arpa/inet.h>
#include <stdio.h>

#include "core/core.h"

#define LEN 100000
#define TAG 9

static int file_exists(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, R_OK) == 0;
}

static void write_file(it_env_t *e, const char *dir, const char *name, const char *text)
{
    char tmp[4096], path[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        printf("rank %d: FAIL - cannot write %s\n", e->rank, path);
        exit(1);
    }
}

static mdr_peer_t *peer_by_uuid(madrail_context_t ctx, uint64_t uuid)
{
    return mdr_hash_get(&ctx->peer_by_uuid, uuid);
}

static void rank0(it_env_t *e, const char *dir)
{
    madrail_context_t ctx = e->ctx;
    uint8_t *buf = it_alloc(e, LEN), addr[64];
    madrail_request_t rr;
    madrail_info_t info;
    mdr_req_t *r;
    mdr_peer_t *stranger = NULL, *p1 = mdr_peer_get(ctx, e->job.peers[1]);
    struct in_addr ip;
    uint16_t port;
    uint64_t su = 0;
    char text[256];
    size_t bad, first;
    double t0, start;
    int i, down1 = 0;
    unsigned long long up0 = 0, up1 = 0;

    memset(buf, 0x5a, LEN);
    if (ctx->nrails < 1 || strcmp(ctx->rails[0].ops->name, "tcp") != 0 ||
        ctx->rails[0].ops->addr_pack(ctx->rails[0].rail, addr, sizeof(addr)) != MADRAIL_OK) {
        printf("rank 0: FAIL - rail 0 is not a tcp rail\n");
        exit(1);
    }
    memcpy(&ip, addr + 4, 4);
    memcpy(&port, addr + 8, 2);
    for (i = 0; i < ctx->nrails; i++)
        up0 += ctx->rails[i].up_events;
    IT_CALL(e, madrail_irecv(ctx, e->job.peers[1], buf, LEN, TAG, 0, &rr));
    r = rr;
    it_check(e, r->rfs_state == MDR_RFS_OUT, "the receive offered its buffer to rank 1");
    snprintf(text, sizeof(text), "%s %u %016llx %016llx %d %016llx\n", inet_ntoa(ip),
             ntohs(port), (unsigned long long)ctx->uuid, (unsigned long long)r->id, LEN,
             (unsigned long long)p1->uuid);
    write_file(e, dir, "victim", text);

    /* progress (accepting the stranger) until its rail is closed, or 10 s
     * after it reported the FIN sent (60 s if it never does) */
    t0 = 0;
    start = it_now();
    while (!(stranger && stranger->rails[0].down)) {
        madrail_progress(ctx);
        if (!su && file_exists(dir, "forged")) {
            char path[4096];
            unsigned long long u = 0;
            FILE *f;
            snprintf(path, sizeof(path), "%s/forged", dir);
            f = fopen(path, "r");
            if (f && fscanf(f, "%llx", &u) == 1)
                su = u;
            if (f)
                fclose(f);
            t0 = it_now();
        }
        if (su && !stranger)
            stranger = peer_by_uuid(ctx, su);
        if (t0 > 0 && it_now() - t0 > 10)
            break;
        if (it_now() - start > 60)
            break;
    }
    it_check(e, stranger != NULL, "the stranger %016llx connected", (unsigned long long)su);
    it_check(e, stranger && stranger->rails[0].down,
             "its rail was closed for the FIN (while its connection stays open)");
    it_check(e, !r->complete && r->fin_bytes == 0 && r->rfs_state == MDR_RFS_OUT,
             "the receive is untouched (complete %d, %llu FIN bytes, offer state %d)",
             r->complete, (unsigned long long)r->fin_bytes, r->rfs_state);
    bad = 0;
    for (i = 0; i < LEN; i++)
        bad += buf[i] != 0x5a;
    it_check(e, bad == 0, "its buffer is unchanged (%zu bytes differ)", bad);
    /* the impostor's attempt, and whatever it did to rank 1's rails */
    start = it_now();
    while (!file_exists(dir, "impostor") && it_now() - start < 30)
        madrail_progress(ctx);
    {
        char path[4096], said[64] = "";
        FILE *f;
        snprintf(path, sizeof(path), "%s/impostor", dir);
        f = fopen(path, "r");
        if (f && fgets(said, sizeof(said), f) == NULL)
            said[0] = '\0';
        if (f)
            fclose(f);
        said[strcspn(said, "\n")] = '\0';
        t0 = it_now();
        while (it_now() - t0 < 0.2) /* anything it set off happens now */
            madrail_progress(ctx);
        it_check(e, strcmp(said, "refused") == 0,
                 "a handshake with the key claiming rank 1's uuid was refused (client: %s)",
                 said[0] ? said : "no report");
    }
    for (i = 0; i < ctx->nrails; i++)
        down1 += p1->rails[i].down;
    it_check(e, down1 == 0, "no rail to rank 1 was closed");
    for (i = 0; i < ctx->nrails; i++)
        up1 += ctx->rails[i].up_events;
    it_check(e, up1 == up0, "no rail to anyone was revived (%llu reconnections)",
             (unsigned long long)(up1 - up0));
    write_file(e, dir, "checked", "1\n");

    IT_CALL(e, madrail_pmi_barrier());
    IT_CALL(e, madrail_wait(&rr, &info));
    bad = it_verify(buf, LEN, it_seed(1, 0, TAG), &first);
    it_check(e, info.length == LEN && bad == 0,
             "rank 1's %d bytes arrived byte-exact (%zu differ, first at %zu)", LEN, bad,
             bad ? first : 0);
    free(buf);
}

static void rank1(it_env_t *e)
{
    madrail_context_t ctx = e->ctx;
    uint8_t *buf = it_alloc(e, LEN);
    mdr_peer_t *p0 = mdr_peer_get(ctx, e->job.peers[0]);
    madrail_request_t sr;
    double t0;

    IT_CALL(e, madrail_pmi_barrier());
    /* take rank 0's offer first, so the send goes receiver-first */
    t0 = it_now();
    while (mdr_list_empty(&p0->rfs_stored) && it_now() - t0 < 10)
        madrail_progress(ctx);
    it_check(e, !mdr_list_empty(&p0->rfs_stored), "rank 0's offer arrived");
    it_fill(buf, LEN, it_seed(1, 0, TAG));
    IT_CALL(e, madrail_isend(ctx, e->job.peers[0], buf, LEN, TAG, 0, &sr));
    IT_CALL(e, madrail_wait(&sr, NULL));
    it_check(e, 1, "the %d-byte send completed", LEN);
    free(buf);
}

/* Both directions, eager and rendezvous, after the attack. */
static void other_traffic(it_env_t *e)
{
    static const size_t sizes[] = {0, 100, 8000, 300000};
    size_t k;
    int dir;

    for (dir = 0; dir < 2; dir++)
        for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            size_t n = sizes[k], bad, first;
            uint64_t tag = 100 + 10 * (uint64_t)dir + k, seed = it_seed(2, (uint64_t)dir, tag);
            uint8_t *buf = it_alloc(e, n);
            if (e->rank == dir) {
                it_fill(buf, n, seed);
                IT_CALL(e, madrail_send(e->ctx, e->job.peers[1 - dir], buf, n, tag, 0));
            } else {
                madrail_info_t info;
                IT_CALL(e, madrail_recv(e->ctx, e->job.peers[dir], buf, n, tag, 0, &info));
                bad = it_verify(buf, n, seed, &first);
                it_expect(e, bad == 0 && info.length == n, "%zu bytes from rank %d: %zu differ",
                          n, dir, bad);
            }
            free(buf);
        }
    it_check(e, e->failures == 0, "other traffic, both directions, byte-exact");
}

int main(int argc, char **argv)
{
    it_env_t e;
    int rc = it_setup(&e, "it_forge", 2, NULL);

    if (rc != 0)
        return rc;
    if (argc != 2 || e.size != 2) {
        printf("rank %d: FAIL - usage: it_forge DIR, on 2 ranks\n", e.rank);
        return 1;
    }
    if (e.rank == 0)
        rank0(&e, argv[1]);
    else
        rank1(&e);
    other_traffic(&e);
    return it_finish(&e);
}
