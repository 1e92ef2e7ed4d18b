/*
 * The handshake proofs (src/rails/common/auth.c): HMAC-SHA-256 as RFC 4231
 * defines it, over exactly the transcript auth.h documents, and a proof
 * that changes with every part of it (role, driver, ids, nonces, rail,
 * key), so none can stand in for another.
 */
#include "mdr_config.h"

#include <sodium.h>
#include <string.h>

#include "rails/common/auth.h"
#include "unit_check.h"

static void hex(char *out, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* The MAC of auth.h's transcript, framed by hand here. */
static void mac_by_hand(uint8_t out[32], const uint8_t *key, size_t key_len, const char *label,
                        const mdr_auth_transcript_t *t)
{
    uint8_t buf[256];
    size_t n = 0;
    uint32_t id_len = (uint32_t)t->rail_id_len;
    crypto_auth_hmacsha256_state st;

    memcpy(buf + n, label, strlen(label) + 1);
    n += strlen(label) + 1;
    memcpy(buf + n, &t->uuid_i, 8);
    n += 8;
    memcpy(buf + n, &t->uuid_a, 8);
    n += 8;
    memcpy(buf + n, t->nonce_i, 16);
    n += 16;
    memcpy(buf + n, t->nonce_a, 16);
    n += 16;
    memcpy(buf + n, &id_len, 4);
    n += 4;
    memcpy(buf + n, t->rail_id, t->rail_id_len);
    n += t->rail_id_len;
    crypto_auth_hmacsha256_init(&st, key, key_len);
    crypto_auth_hmacsha256_update(&st, buf, n);
    crypto_auth_hmacsha256_final(&st, out);
}

int main(void)
{
    uint8_t key[16], key2[16], ni[16], na[16], m[32], m2[32];
    const uint8_t rail[] = {10, 0, 0, 1, 0x1f, 0x90};
    mdr_auth_transcript_t t = {"tcp", 0x1111, 0x2222, ni, na, rail, sizeof(rail)}, u;
    char h[65];

    check(mdr_auth_init() == 0, "libsodium starts");
    check(mdr_auth_init() == 0, "and starting it again is harmless");

    /* RFC 4231 test case 2: key "Jefe", the primitive under everything */
    {
        crypto_auth_hmacsha256_state st;
        const char *data = "what do ya want for nothing?";
        crypto_auth_hmacsha256_init(&st, (const unsigned char *)"Jefe", 4);
        crypto_auth_hmacsha256_update(&st, (const unsigned char *)data, strlen(data));
        crypto_auth_hmacsha256_final(&st, m);
        hex(h, m, 32);
        check(strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0,
              "HMAC-SHA-256 of RFC 4231 case 2: %s", h);
    }

    mdr_auth_nonce(ni);
    mdr_auth_nonce(na);
    check(memcmp(ni, na, 16) != 0, "two nonces differ");
    memset(key, 0x5a, sizeof(key));
    memcpy(key2, key, sizeof(key2));
    key2[15] ^= 1;

    mdr_auth_mac(m, key, sizeof(key), MDR_AUTH_INITIATOR, &t);
    mac_by_hand(m2, key, sizeof(key), "madrail handshake v1 tcp initiator", &t);
    check(memcmp(m, m2, 32) == 0, "the initiator's proof is the HMAC of the documented transcript");
    mdr_auth_mac(m, key, sizeof(key), MDR_AUTH_ACCEPTOR, &t);
    mac_by_hand(m2, key, sizeof(key), "madrail handshake v1 tcp acceptor", &t);
    check(memcmp(m, m2, 32) == 0, "and the acceptor's too");

    mdr_auth_mac(m, key, sizeof(key), MDR_AUTH_INITIATOR, &t);
    check(mdr_auth_mac_equal(m, m), "a proof equals itself");
#define DIFFERS(what, stmt, role_, keyp)                                                     \
    do {                                                                                   \
        u = t;                                                                             \
        stmt;                                                                              \
        mdr_auth_mac(m2, keyp, 16, role_, &u);                                             \
        check(!mdr_auth_mac_equal(m, m2), "the proof changes with %s", what);              \
    } while (0)
    DIFFERS("the role (no reflection)", (void)0, MDR_AUTH_ACCEPTOR, key);
    DIFFERS("the role (session secret is not a proof)", (void)0, MDR_AUTH_SESSION, key);
    DIFFERS("the driver", u.driver = "ofi", MDR_AUTH_INITIATOR, key);
    DIFFERS("the initiator's id", u.uuid_i ^= 1, MDR_AUTH_INITIATOR, key);
    DIFFERS("the acceptor's id", u.uuid_a ^= 1, MDR_AUTH_INITIATOR, key);
    DIFFERS("swapped ids", (u.uuid_i = t.uuid_a, u.uuid_a = t.uuid_i), MDR_AUTH_INITIATOR, key);
    DIFFERS("the acceptor's nonce", u.nonce_a = ni, MDR_AUTH_INITIATOR, key);
    DIFFERS("the initiator's nonce", u.nonce_i = na, MDR_AUTH_INITIATOR, key);
    DIFFERS("the rail", u.rail_id_len = 5, MDR_AUTH_INITIATOR, key);
    DIFFERS("one bit of the key", (void)0, MDR_AUTH_INITIATOR, key2);

    {
        uint8_t z[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        mdr_auth_wipe(z, sizeof(z));
        check(z[0] == 0 && z[7] == 0, "wipe zeroes");
    }

    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
