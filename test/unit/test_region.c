/*
 * The software-put region table (rails/common/region.c) on its own: what
 * a peer that read one CTS, or holds a key from an earlier transfer, can
 * do with it.  Keys must not follow from earlier ones (a counter in the
 * high half would let a reader of one key write into the next buffer);
 * a removed region's key must fail; a region takes puts only from the peer
 * it was offered to, and none before it was offered.  The drivers' own
 * put paths are checked over real rails by the conformance suite
 * (put-region-of-another-peer, put-stale-key).
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/region.h"
#include "rails/common/sw_reg.h"
#include "rails/rail.h"
#include "unit_check.h"

#define PEER_A 0x1111000000000001ull
#define PEER_B 0x2222000000000002ull
#define NREG 1000

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The same memory registered, offered and removed NREG times over: every
 * key differs, and none is the previous one plus a step. */
static void test_keys_fresh(void)
{
    static uint8_t buf[4096];
    static uint64_t keys[NREG];
    mdr_region_tab_t tab;
    mdr_region_t r;
    int i, dup = 0, stepped = 0, same_id = 1;
    const char *why = NULL;

    memset(&tab, 0, sizeof(tab));
    for (i = 0; i < NREG; i++) {
        if (mdr_region_add(&tab, &r, (uintptr_t)buf, sizeof(buf), MDR_MEM_REMOTE_WRITE) !=
            MADRAIL_OK) {
            check(0, "mdr_region_add #%d", i);
            goto out;
        }
        keys[i] = mdr_region_key(&r);
        if (i > 0 && (uint32_t)keys[i] != (uint32_t)keys[i - 1])
            same_id = 0;
        if (i > 0 && (keys[i] >> 32) - (keys[i - 1] >> 32) <= 2)
            stepped++;
        (void)mdr_region_remove(&tab, &r);
    }
    check(same_id, "the id is reused (last freed first), so only the tag tells keys apart");
    check(keys[1] != keys[0], "a second registration of the same memory has another key "
                              "(%016llx, %016llx)",
          (unsigned long long)keys[0], (unsigned long long)keys[1]);
    check(stepped == 0, "no key is its predecessor's tag plus 0..2 (%d of %d were)", stepped,
          NREG - 1);
    mdr_region_lookup(&tab, keys[NREG - 1], &why);
    check(why == mdr_region_why_stale, "the last key after its region was removed: %s",
          why ? why : "(accepted)");
    qsort(keys, NREG, sizeof(keys[0]), cmp_u64);
    for (i = 1; i < NREG; i++)
        dup += keys[i] == keys[i - 1];
    check(dup == 0, "%d registrations, %d repeated keys", NREG, dup);
out:
    mdr_region_tab_cleanup(&tab, NULL, NULL);
}

/* Keys of two live registrations and of two tables differ in their tag
 * too: the tag is not a per-table counter starting at the same value. */
static void test_keys_tables(void)
{
    static uint8_t buf[64];
    mdr_region_tab_t t1, t2;
    mdr_region_t a, b;

    memset(&t1, 0, sizeof(t1));
    memset(&t2, 0, sizeof(t2));
    if (mdr_region_add(&t1, &a, (uintptr_t)buf, sizeof(buf), MDR_MEM_REMOTE_WRITE) !=
            MADRAIL_OK ||
        mdr_region_add(&t2, &b, (uintptr_t)buf, sizeof(buf), MDR_MEM_REMOTE_WRITE) !=
            MADRAIL_OK) {
        check(0, "mdr_region_add in two tables");
        return;
    }
    check(a.id == b.id && a.gen != b.gen,
          "first registrations of two tables: same id %u, tags %08x and %08x differ", a.id,
          a.gen, b.gen);
    mdr_region_tab_cleanup(&t1, NULL, NULL);
    mdr_region_tab_cleanup(&t2, NULL, NULL);
}

/* The peer binding of check_put, and sw_reg's rkey_pack that sets it. */
static void test_bind(void)
{
    static uint8_t buf[4096];
    mdr_region_tab_t tab;
    mdr_region_t *r;
    uint64_t key, old_key;
    size_t klen = sizeof(key);
    const char *why;
    void *mh;

    memset(&tab, 0, sizeof(tab));
    if (mdr_sw_reg_new(&tab, "test", buf, sizeof(buf), MDR_MEM_REMOTE_WRITE, sizeof(*r), 0,
                       &mh) != MADRAIL_OK) {
        check(0, "mdr_sw_reg_new");
        return;
    }
    r = mh;
    key = mdr_region_key(r);
    why = NULL;
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf, 8, PEER_A, &why) == NULL &&
              why == mdr_region_why_unbound,
          "a region never offered takes no put: %s", why ? why : "(accepted)");

    check(mdr_sw_rkey_pack(&tab, r, PEER_A, &key, &klen) == MADRAIL_OK && klen == 8,
          "rkey_pack offers it to peer A");
    why = NULL;
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf, 8, PEER_A, &why) == r,
          "a put from A with the key lands (%s)", why ? why : "ok");
    why = NULL;
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf, 8, PEER_B, &why) == NULL &&
              why == mdr_region_why_peer,
          "a put from B with A's key is refused: %s", why ? why : "(accepted)");
    why = NULL;
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf + 4090, 8, PEER_A, &why) == NULL &&
              why == mdr_region_why_range,
          "A's put past the end is still refused: %s", why ? why : "(accepted)");

    /* a cached registration offered again to another peer moves to it */
    check(mdr_sw_rkey_pack(&tab, r, PEER_B, &key, &klen) == MADRAIL_OK,
          "rkey_pack offers it to peer B");
    why = NULL;
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf, 8, PEER_A, &why) == NULL &&
              why == mdr_region_why_peer,
          "after the offer to B, A's put is refused: %s", why ? why : "(accepted)");
    check(mdr_region_check_put(&tab, key, (uintptr_t)buf, 8, PEER_B, &why) == r,
          "and B's lands");

    /* revoked: the key is dead for its own peer too, and the next region
     * filed under the same id (offered to the same peer) does not take it */
    old_key = key;
    (void)mdr_region_remove(&tab, r);
    free(mh);
    why = NULL;
    check(mdr_region_check_put(&tab, old_key, (uintptr_t)buf, 8, PEER_B, &why) == NULL &&
              why == mdr_region_why_stale,
          "after mem_dereg the key is refused: %s", why ? why : "(accepted)");
    if (mdr_sw_reg_new(&tab, "test", buf, sizeof(buf), MDR_MEM_REMOTE_WRITE, sizeof(*r), 0,
                       &mh) != MADRAIL_OK) {
        check(0, "mdr_sw_reg_new again");
        goto out;
    }
    r = mh;
    (void)mdr_sw_rkey_pack(&tab, r, PEER_B, &key, &klen);
    why = NULL;
    check((uint32_t)key == (uint32_t)old_key && key != old_key &&
              mdr_region_check_put(&tab, old_key, (uintptr_t)buf, 8, PEER_B, &why) == NULL &&
              why == mdr_region_why_stale,
          "the old key does not open the new region under the same id: %s",
          why ? why : "(accepted)");
    (void)mdr_region_remove(&tab, r);
    free(mh);
out:
    mdr_region_tab_cleanup(&tab, NULL, NULL);
}

int main(void)
{
    test_keys_fresh();
    test_keys_tables();
    test_bind();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
