/*
 * Handshake proofs: HMAC-SHA-256 from libsodium over a labelled transcript
 * (auth.h).  Nothing here is hand-made cryptography: the MAC, the random
 * source and the constant-time comparison are libsodium's.
 */
#include "mdr_config.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "rails/common/auth.h"
#include "util/log.h"

int mdr_auth_init(void)
{
    /* 0: started now, 1: already started, -1: failed */
    if (sodium_init() < 0) {
        mdr_error("libsodium failed to start (sodium_init): handshakes cannot be authenticated");
        return -1;
    }
    return 0;
}

void mdr_auth_nonce(uint8_t nonce[MDR_AUTH_NONCE_LEN])
{
    randombytes_buf(nonce, MDR_AUTH_NONCE_LEN);
}

uint64_t mdr_auth_random64(void)
{
    uint64_t v;
    randombytes_buf(&v, sizeof(v));
    return v;
}

static const char *mdr_auth_role_name(mdr_auth_role_t role)
{
    switch (role) {
    case MDR_AUTH_INITIATOR:
        return "initiator";
    case MDR_AUTH_ACCEPTOR:
        return "acceptor";
    case MDR_AUTH_SESSION:
        return "session";
    case MDR_AUTH_CONTINUITY:
        return "continuity";
    }
    return "?";
}

void mdr_auth_mac(uint8_t out[MDR_AUTH_MAC_LEN], const uint8_t *key, size_t key_len,
                  mdr_auth_role_t role, const mdr_auth_transcript_t *t)
{
    crypto_auth_hmacsha256_state st;
    char label[64];
    uint32_t id_len = (uint32_t)t->rail_id_len;
    /* the label ends with its NUL, so "tcp" + role never reads as a prefix
     * of another driver's label */
    int n = snprintf(label, sizeof(label), "madrail handshake v1 %s %s", t->driver,
                     mdr_auth_role_name(role));
    if (n < 0 || (size_t)n >= sizeof(label))
        n = (int)sizeof(label) - 1;

    crypto_auth_hmacsha256_init(&st, key, key_len);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, (size_t)n + 1);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&t->uuid_i, sizeof(t->uuid_i));
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&t->uuid_a, sizeof(t->uuid_a));
    crypto_auth_hmacsha256_update(&st, t->nonce_i, MDR_AUTH_NONCE_LEN);
    crypto_auth_hmacsha256_update(&st, t->nonce_a, MDR_AUTH_NONCE_LEN);
    crypto_auth_hmacsha256_update(&st, (const unsigned char *)&id_len, sizeof(id_len));
    if (t->rail_id_len)
        crypto_auth_hmacsha256_update(&st, t->rail_id, t->rail_id_len);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
}

int mdr_auth_mac_equal(const uint8_t *expected, const void *got)
{
    return sodium_memcmp(expected, got, MDR_AUTH_MAC_LEN) == 0;
}

void mdr_auth_wipe(void *p, size_t len)
{
    sodium_memzero(p, len);
}
