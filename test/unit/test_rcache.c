/*
 * Registration cache unit test over a fake driver defined here: its
 * mem_reg/mem_dereg count calls, record the ranges and hand out handles
 * whose identity the test can follow, so each check is about which
 * registrations really happened (not about the cache's own statistics,
 * which are checked separately against the fake's counts).
 */
#include "mdr_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/rcache.h"

static int failures;

static void check(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    if (!cond)
        failures++;
}

/* ---------------- the fake driver ---------------- */

typedef struct fake_memh {
    uintptr_t addr;
    size_t len;
    unsigned access;
    int live;
    int id;
} fake_memh_t;

#define FAKE_MAX 256

static struct {
    uint32_t caps;
    int nreg, ndereg;
    int fail_next;             /* mem_reg fails this many times */
    fake_memh_t regs[FAKE_MAX];
    int last_dereg_id;
    int live;
} fake;

static void fake_reset(uint32_t caps)
{
    memset(&fake, 0, sizeof(fake));
    fake.caps = caps;
    fake.last_dereg_id = -1;
}

static void fake_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    (void)rail;
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "fake:0");
    attr->caps = fake.caps;
}

static madrail_status_t fake_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                     mdr_memh_t **memh_p)
{
    fake_memh_t *m;
    (void)rail;
    if (fake.fail_next > 0) {
        fake.fail_next--;
        return MADRAIL_ERR_NORESOURCE;
    }
    if (fake.nreg >= FAKE_MAX)
        return MADRAIL_ERR_NOMEM;
    m = &fake.regs[fake.nreg];
    m->addr = (uintptr_t)addr;
    m->len = len;
    m->access = access;
    m->live = 1;
    m->id = fake.nreg++;
    fake.live++;
    *memh_p = (mdr_memh_t *)m;
    return MADRAIL_OK;
}

static void fake_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    fake_memh_t *m = (fake_memh_t *)memh;
    (void)rail;
    fake.ndereg++;
    if (!m->live) {
        printf("FAIL fake driver: double deregistration of handle %d\n", m->id);
        failures++;
        return;
    }
    m->live = 0;
    fake.live--;
    fake.last_dereg_id = m->id;
}

static const mdr_rail_ops_t fake_ops = {
    .name = "fake",
    .query = fake_query,
    .mem_reg = fake_mem_reg,
    .mem_dereg = fake_mem_dereg,
};

static int fake_rail_storage;
#define FAKE_RAIL ((mdr_rail_t *)&fake_rail_storage)

static fake_memh_t *memh_of(mdr_rcache_entry_t *e)
{
    return (fake_memh_t *)mdr_rcache_memh(e);
}

/* ---------------- tests ---------------- */

static void identity_case(const char *label, int enable, uint32_t caps)
{
    static char buf[10000];
    mdr_rcache_t *rc = NULL;
    mdr_rcache_entry_t *e[3];
    mdr_rcache_stats_t st;
    char what[160];
    int i, exact = 1, same = 1;

    fake_reset(caps);
    check(mdr_rcache_create(&fake_ops, FAKE_RAIL, enable, 16, &rc) == MADRAIL_OK && rc,
          "identity: create");
    if (!rc)
        return;
    for (i = 0; i < 3; i++) {
        if (mdr_rcache_get(rc, buf + 123, 777, MDR_MEM_REMOTE_WRITE, &e[i]) != MADRAIL_OK) {
            exact = 0;
            e[i] = NULL;
            continue;
        }
        if (memh_of(e[i])->addr != (uintptr_t)(buf + 123) || memh_of(e[i])->len != 777 ||
            memh_of(e[i])->access != MDR_MEM_REMOTE_WRITE)
            exact = 0;
    }
    snprintf(what, sizeof(what), "%s: 3 gets of one range -> 3 mem_reg of exactly it (got %d)",
             label, fake.nreg);
    check(fake.nreg == 3 && exact, what);
    for (i = 0; i < 3; i++) {
        int before = fake.ndereg;
        int id = e[i] ? memh_of(e[i])->id : -2;
        mdr_rcache_put(rc, e[i]);
        if (fake.ndereg != before + 1 || fake.last_dereg_id != id)
            same = 0;
    }
    snprintf(what, sizeof(what), "%s: every put deregisters its own handle at once", label);
    check(same && fake.ndereg == 3 && fake.live == 0, what);
    mdr_rcache_get_stats(rc, &st);
    snprintf(what, sizeof(what), "%s: stats regs=%llu deregs=%llu hits=%llu", label,
             (unsigned long long)st.regs, (unsigned long long)st.deregs,
             (unsigned long long)st.hits);
    check(st.regs == 3 && st.deregs == 3 && st.hits == 0, what);

    /* a held registration is released by destroy */
    mdr_rcache_get(rc, buf, 10, MDR_MEM_LOCAL, &e[0]);
    mdr_rcache_destroy(rc);
    snprintf(what, sizeof(what), "%s: destroy deregisters a registration still held", label);
    check(fake.live == 0 && fake.nreg == fake.ndereg, what);
}

static void cache_case(void)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t region = 64 * (size_t)page;
    char *mem;
    mdr_rcache_t *rc = NULL;
    mdr_rcache_entry_t *a, *b, *c, *d;
    mdr_rcache_stats_t st;
    fake_memh_t *m;

    if (posix_memalign((void **)&mem, (size_t)page, region) != 0) {
        check(0, "cache: allocate test memory");
        return;
    }
    fake_reset(MDR_RAIL_CAP_PUT);
    check(mdr_rcache_create(&fake_ops, FAKE_RAIL, 1, 16, &rc) == MADRAIL_OK && rc,
          "cache: create");
    if (!rc) {
        free(mem);
        return;
    }

    /* miss: registers a page-rounded region covering the request */
    check(mdr_rcache_get(rc, mem + 100, 1000, MDR_MEM_LOCAL, &a) == MADRAIL_OK,
          "cache: first get succeeds");
    m = memh_of(a);
    check(fake.nreg == 1 && m->addr % (uintptr_t)page == 0 && m->len % (size_t)page == 0 &&
              m->addr <= (uintptr_t)(mem + 100) && m->addr + m->len >= (uintptr_t)(mem + 1100),
          "cache: miss registers one page-aligned region covering the request");

    /* hit: sub-range of the same region, entry shared */
    check(mdr_rcache_get(rc, mem + 200, 500, MDR_MEM_LOCAL, &b) == MADRAIL_OK && b == a &&
              fake.nreg == 1,
          "cache: covered sub-range hits (no mem_reg, same region)");
    /* same page, beyond the requested bytes but inside the rounded region */
    check(mdr_rcache_get(rc, mem + 2000, 100, MDR_MEM_LOCAL, &c) == MADRAIL_OK && c == a &&
              fake.nreg == 1,
          "cache: other bytes of the same page hit");
    mdr_rcache_put(rc, c);
    /* miss: not covered */
    check(mdr_rcache_get(rc, mem + 8 * page, 3 * page, MDR_MEM_LOCAL, &c) == MADRAIL_OK &&
              c != a && fake.nreg == 2,
          "cache: uncovered range misses (new mem_reg)");
    /* miss: partially covered (straddles the end of region a) */
    check(mdr_rcache_get(rc, mem + page - 10, 20 + (size_t)page, MDR_MEM_LOCAL, &d) ==
                  MADRAIL_OK &&
              d != a && fake.nreg == 3 && memh_of(d)->addr <= (uintptr_t)(mem + page - 10) &&
              memh_of(d)->addr + memh_of(d)->len >= (uintptr_t)(mem + 2 * page + 10),
          "cache: partially covered range misses, new region covers it");
    mdr_rcache_put(rc, d);
    /* access flags: a LOCAL region does not serve a REMOTE_WRITE request */
    check(mdr_rcache_get(rc, mem + 200, 10, MDR_MEM_REMOTE_WRITE, &d) == MADRAIL_OK &&
              d != a && fake.nreg == 4 && memh_of(d)->access == MDR_MEM_REMOTE_WRITE,
          "cache: region registered without remote write does not serve it");
    mdr_rcache_put(rc, d);

    mdr_rcache_put(rc, a);
    mdr_rcache_put(rc, b);
    mdr_rcache_put(rc, c);
    check(fake.ndereg == 0, "cache: puts keep regions registered");
    check(mdr_rcache_get(rc, mem + 300, 10, MDR_MEM_LOCAL, &a) == MADRAIL_OK && fake.nreg == 4,
          "cache: region reused after its last put");
    mdr_rcache_put(rc, a);
    /* zero-length request */
    check(mdr_rcache_get(rc, mem + 300, 0, MDR_MEM_LOCAL, &a) == MADRAIL_OK && fake.nreg == 4,
          "cache: zero-length request inside a region hits");
    mdr_rcache_put(rc, a);

    mdr_rcache_get_stats(rc, &st);
    check(st.hits == 4 && st.misses == 4 && st.regs == 4 && st.deregs == 0 &&
              st.evictions == 0,
          "cache: stats 4 hits, 4 misses, 4 regs, 0 deregs");

    /* a registration failure is reported, then retried after dropping
     * unused regions */
    fake.fail_next = 1;
    check(mdr_rcache_get(rc, mem + 20 * page, 10, MDR_MEM_LOCAL, &a) == MADRAIL_OK &&
              fake.ndereg == 4 && fake.live == 1,
          "cache: mem_reg failure -> unused regions dropped, retry succeeds");
    mdr_rcache_get(rc, mem + 30 * page, 10, MDR_MEM_LOCAL, &b);
    mdr_rcache_put(rc, b);
    fake.fail_next = 2;
    printf("     (an rcache error message is expected next)\n");
    check(mdr_rcache_get(rc, mem + 40 * page, 10, MDR_MEM_LOCAL, &c) == MADRAIL_ERR_NORESOURCE,
          "cache: persistent mem_reg failure is returned");
    check(fake.live == 1 && fake.ndereg == 5 && fake.regs[memh_of(a)->id].live,
          "cache: failure path dropped the unused region but not the referenced one");

    /* destroy deregisters everything, also the referenced entry */
    printf("     (an rcache warning about a region in use is expected next)\n");
    mdr_rcache_destroy(rc);
    check(fake.live == 0 && fake.ndereg == fake.nreg, "cache: destroy deregisters all");
    free(mem);
}

static void lru_case(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *mem;
    mdr_rcache_t *rc = NULL;
    mdr_rcache_entry_t *e[6];
    int id[6], i;
    mdr_rcache_stats_t st;

    if (posix_memalign((void **)&mem, (size_t)page, 16 * (size_t)page) != 0) {
        check(0, "lru: allocate test memory");
        return;
    }
#define REG(i) (mem + 2 * (i) * page + 8) /* one page apart: never the same region */
    fake_reset(0);
    if (mdr_rcache_create(&fake_ops, FAKE_RAIL, 1, 3, &rc) != MADRAIL_OK) {
        check(0, "lru: create");
        free(mem);
        return;
    }
    for (i = 0; i < 3; i++) {
        mdr_rcache_get(rc, REG(i), 64, MDR_MEM_LOCAL, &e[i]);
        id[i] = memh_of(e[i])->id;
        mdr_rcache_put(rc, e[i]);
    }
    check(fake.nreg == 3 && fake.ndereg == 0, "lru: 3 regions at the limit, none evicted");
    /* touch region 0: region 1 becomes least recently used */
    mdr_rcache_get(rc, REG(0), 64, MDR_MEM_LOCAL, &e[0]);
    mdr_rcache_put(rc, e[0]);
    mdr_rcache_get(rc, REG(3), 64, MDR_MEM_LOCAL, &e[3]);
    id[3] = memh_of(e[3])->id;
    check(fake.ndereg == 1 && fake.last_dereg_id == id[1],
          "lru: 4th region evicts the least recently used one (region 1)");
    check(mdr_rcache_get(rc, REG(0), 64, MDR_MEM_LOCAL, &e[0]) == MADRAIL_OK &&
              memh_of(e[0])->id == id[0] && fake.nreg == 4,
          "lru: recently used region 0 is still cached");
    /* now 0 and 3 are referenced; 2 is the only unreferenced one */
    mdr_rcache_get(rc, REG(4), 64, MDR_MEM_LOCAL, &e[4]);
    check(fake.ndereg == 2 && fake.last_dereg_id == id[2],
          "lru: next miss evicts the only unreferenced region (2)");
    mdr_rcache_get(rc, REG(5), 64, MDR_MEM_LOCAL, &e[5]);
    id[5] = memh_of(e[5])->id;
    check(fake.ndereg == 2 && fake.live == 4,
          "lru: all referenced -> none evicted, cache may exceed the limit");
    /* releasing a region while over the limit evicts it */
    mdr_rcache_put(rc, e[5]);
    check(fake.ndereg == 3 && fake.live == 3 && fake.last_dereg_id == id[5] &&
              fake.regs[id[0]].live,
          "lru: put while over the limit evicts the released region");
    mdr_rcache_put(rc, e[0]);
    mdr_rcache_put(rc, e[3]);
    mdr_rcache_put(rc, e[4]);
    check(fake.live == 3, "lru: at the limit again, puts evict nothing");
    mdr_rcache_get_stats(rc, &st);
    check(st.evictions == 3 && st.regs == 6 && st.deregs == 3,
          "lru: stats 3 evictions, 6 regs, 3 deregs");
    mdr_rcache_destroy(rc);
    check(fake.live == 0 && fake.ndereg == 6, "lru: destroy deregisters the rest");

    /* max_regions 0: nothing is kept once released */
    fake_reset(0);
    mdr_rcache_create(&fake_ops, FAKE_RAIL, 1, 0, &rc);
    mdr_rcache_get(rc, REG(0), 64, MDR_MEM_LOCAL, &e[0]);
    mdr_rcache_get(rc, REG(0), 64, MDR_MEM_LOCAL, &e[1]);
    check(fake.nreg == 1 && e[0] == e[1], "lru: max 0 still shares a referenced region");
    mdr_rcache_put(rc, e[0]);
    check(fake.ndereg == 0, "lru: max 0 keeps a region while referenced");
    mdr_rcache_put(rc, e[1]);
    check(fake.ndereg == 1, "lru: max 0 deregisters at the last put");
    mdr_rcache_destroy(rc);
#undef REG
    free(mem);
}

/* A target offered to one peer's live transfer is not handed to another
 * peer's (rkey_pack would move it away from the first, whose puts would
 * then be refused); once the first gives it back it is reused. */
static void offer_case(void)
{
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t p = 0x1111, q = 0x2222;
    char *mem;
    mdr_rcache_t *rc = NULL;
    mdr_rcache_entry_t *a = NULL, *b = NULL, *c = NULL;

    if (posix_memalign((void **)&mem, (size_t)page, 4 * (size_t)page) != 0) {
        check(0, "offer: allocate test memory");
        return;
    }
    fake_reset(MDR_RAIL_CAP_PUT);
    if (mdr_rcache_create(&fake_ops, FAKE_RAIL, 1, 16, &rc) != MADRAIL_OK) {
        check(0, "offer: create");
        free(mem);
        return;
    }
    mdr_rcache_get_offer(rc, mem, 100, MDR_MEM_REMOTE_WRITE, 1, p, &a);
    check(mdr_rcache_get_offer(rc, mem + 200, 100, MDR_MEM_REMOTE_WRITE, 1, p, &b) ==
                  MADRAIL_OK && b == a && fake.nreg == 1,
          "offer: a second target of the same peer shares the region");
    mdr_rcache_put(rc, b);
    check(mdr_rcache_get_offer(rc, mem + 200, 100, MDR_MEM_REMOTE_WRITE, 1, q, &c) ==
                  MADRAIL_OK && c != a && fake.nreg == 2,
          "offer: another peer's target while the first is live gets its own region");
    check(mdr_rcache_get(rc, mem + 300, 10, MDR_MEM_REMOTE_WRITE, &b) == MADRAIL_OK &&
              (b == a || b == c) && fake.nreg == 2,
          "offer: a use that offers nothing still shares");
    mdr_rcache_put(rc, b);
    mdr_rcache_put(rc, c);
    mdr_rcache_put(rc, a);
    check(mdr_rcache_get_offer(rc, mem + 200, 100, MDR_MEM_REMOTE_WRITE, 1, q, &c) ==
                  MADRAIL_OK && fake.nreg == 2,
          "offer: once given back, a region is reused for the other peer (re-offered)");
    mdr_rcache_put(rc, c);
    mdr_rcache_destroy(rc);
    free(mem);
}

int main(void)
{
    identity_case("identity (enable=0)", 0, MDR_RAIL_CAP_PUT);
    identity_case("identity (REG_CHEAP)", 1, MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP);
    cache_case();
    lru_case();
    offer_case();
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("all rcache checks passed\n");
    return 0;
}
