/*
 * Handshake authentication without sending the key: a challenge-response
 * over HMAC-SHA-256 (libsodium's crypto_auth_hmacsha256), the same in
 * every driver.
 *
 * Each side of a handshake contributes a fresh random nonce.  A side
 * proves it holds the job key by sending
 *
 *     HMAC(key, label(driver, role) || uuid_i || uuid_a || nonce_i ||
 *          nonce_a || len(rail_id) || rail_id)
 *
 * where _i is the side that connects (initiator), _a the side that
 * accepts, and rail_id bytes both sides know of the rail (for example the
 * acceptor's rail address).  The role is in the label, so the initiator's
 * proof is never a valid acceptor proof (no reflection), and the driver is
 * in the label, so a proof made for one driver proves nothing on another.
 * A recording of any number of handshakes gives neither the key (HMAC is
 * a PRF: its outputs say nothing of the key) nor a proof that can be used
 * again (the other side's nonce is new each time).
 *
 * The same transcript under another label gives the session secret of
 * the connection: both sides know it, nobody else does, and a later
 * connection of the same pair proves continuity with this one by a proof
 * keyed with that secret instead of the job key.
 *
 * Costs one HMAC per side and handshake: nothing per message.
 */
#ifndef MDR_RAILS_AUTH_H
#define MDR_RAILS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define MDR_AUTH_NONCE_LEN 16
#define MDR_AUTH_MAC_LEN 32

typedef enum mdr_auth_role {
    MDR_AUTH_INITIATOR = 1, /* the connecting side's proof */
    MDR_AUTH_ACCEPTOR,      /* the accepting side's proof */
    MDR_AUTH_SESSION,       /* the session secret (never sent) */
    MDR_AUTH_CONTINUITY     /* a reconnection's proof, keyed by the old session secret */
} mdr_auth_role_t;

/* What both sides of one handshake know. */
typedef struct mdr_auth_transcript {
    const char *driver;                       /* "tcp", "ofi", "ucx", ... */
    uint64_t uuid_i, uuid_a;                  /* initiator's and acceptor's ids */
    const uint8_t *nonce_i, *nonce_a;         /* MDR_AUTH_NONCE_LEN bytes each */
    const void *rail_id;                      /* may be NULL when rail_id_len is 0 */
    size_t rail_id_len;
} mdr_auth_transcript_t;

/* Ready libsodium (once per process; safe to call again and from several
 * threads).  0 on success, -1 (logged) when libsodium cannot start. */
int mdr_auth_init(void);

/* A fresh nonce from the system's random source. */
void mdr_auth_nonce(uint8_t nonce[MDR_AUTH_NONCE_LEN]);

/* A 64-bit value from the system's random source (remote-write keys the
 * driver chooses, so that one seen says nothing of the next). */
uint64_t mdr_auth_random64(void);

/* out = HMAC-SHA-256 keyed by key[0..key_len) over role's label and t. */
void mdr_auth_mac(uint8_t out[MDR_AUTH_MAC_LEN], const uint8_t *key, size_t key_len,
                  mdr_auth_role_t role, const mdr_auth_transcript_t *t);

/* 1 if the MDR_AUTH_MAC_LEN bytes at got equal expected, in constant time. */
int mdr_auth_mac_equal(const uint8_t *expected, const void *got);

/* Overwrite len bytes at p in a way the compiler keeps (for secrets). */
void mdr_auth_wipe(void *p, size_t len);

#endif /* MDR_RAILS_AUTH_H */
