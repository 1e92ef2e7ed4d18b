/*
 * Registrations of the ofi driver: fi_mr_reg honouring the provider's
 * mr_mode.  The driver asks for every mode bit it can cope with
 * (FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY,
 * FI_MR_ENDPOINT) and the provider keeps those it needs:
 *   PROV_KEY  the provider picks the key; else we request a fresh one
 *   ENDPOINT  a region must be bound to the endpoint and enabled
 *   VIRT_ADDR remote addresses are virtual addresses; else offsets
 * The packed remote key carries the key and the region's base and length,
 * so the initiator turns the core's virtual address into what its provider
 * wants and refuses a write outside the region before it leaves.
 */
#include "mdr_config.h"

#include <stdlib.h>
#include <string.h>

#include "rails/common/auth.h"
#include "rails/ofi/ofi.h"
#include "util/log.h"

madrail_status_t mdr_ofi_mem_reg(mdr_rail_t *rail, void *addr, size_t len, unsigned access,
                                 mdr_memh_t **memh_p)
{
    uint64_t acc = 0, key;
    mdr_memh_t *memh;
    madrail_status_t st;
    int ret, tries;

    if (rail == NULL || addr == NULL || len == 0 || memh_p == NULL)
        return MADRAIL_ERR_INVALID;
    if (access & MDR_MEM_LOCAL)
        acc |= FI_WRITE | FI_SEND;
    if (access & MDR_MEM_REMOTE_WRITE)
        acc |= FI_REMOTE_WRITE;
    if (acc == 0)
        return MADRAIL_ERR_INVALID;
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL)
        return MADRAIL_ERR_NOMEM;
    /* A key we choose is drawn at random, so that a key seen in one CTS
     * says nothing of another transfer's (the provider binds a key to no
     * peer: docs/security.md); a clash with a live one is tried again. */
    for (tries = 0;; tries++) {
        key = 0;
        if (!(rail->mr_mode & FI_MR_PROV_KEY)) {
            key = (access & MDR_MEM_REMOTE_WRITE) ? mdr_auth_random64() : rail->next_key++;
            if (rail->mr_key_size < 8)
                key &= (1ull << (8 * rail->mr_key_size)) - 1;
        }
        ret = fi_mr_reg(rail->domain, addr, len, acc, 0, key, 0, &memh->mr, NULL);
        if (ret != -FI_ENOKEY || (rail->mr_mode & FI_MR_PROV_KEY) || tries >= 8)
            break;
    }
    if (ret != 0) {
        mdr_warn("rail %s: fi_mr_reg of %zu bytes at %p: %s", rail->log_name, len, addr,
                 fi_strerror(-ret));
        st = ret == -FI_ENOMEM ? MADRAIL_ERR_NOMEM : MADRAIL_ERR_NORESOURCE;
        goto err_free;
    }
    if (rail->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(memh->mr, &rail->ep->fid, 0);
        if (ret == 0)
            ret = fi_mr_enable(memh->mr);
        if (ret != 0) {
            mdr_error("rail %s: binding a registration to the endpoint: %s", rail->log_name,
                      fi_strerror(-ret));
            st = MADRAIL_ERR_IO;
            goto err_close;
        }
    }
    memh->key = fi_mr_key(memh->mr);
    if (memh->key == FI_KEY_NOTAVAIL) {
        mdr_error("rail %s: the provider gave no key for a registration", rail->log_name);
        st = MADRAIL_ERR_IO;
        goto err_close;
    }
    memh->desc = fi_mr_desc(memh->mr);
    memh->addr = (uintptr_t)addr;
    memh->len = len;
    mdr_list_push_tail(&rail->memhs, &memh->link);
    *memh_p = memh;
    return MADRAIL_OK;

err_close:
    fi_close(&memh->mr->fid);
err_free:
    free(memh);
    return st;
}

void mdr_ofi_mem_dereg(mdr_rail_t *rail, mdr_memh_t *memh)
{
    int ret;

    if (rail == NULL || memh == NULL)
        return;
    mdr_list_del(&memh->link);
    ret = fi_close(&memh->mr->fid);
    if (ret != 0)
        mdr_warn("rail %s: closing a registration: %s", rail->log_name, fi_strerror(-ret));
    free(memh);
}

madrail_status_t mdr_ofi_rkey_pack(mdr_rail_t *rail, mdr_memh_t *memh, uint64_t peer,
                                   void *buf, size_t *len_p)
{
    uint8_t *p = buf;
    uint64_t base, len;
    uint32_t flags, pad = 0;

    /* Not bound: the provider lets any endpoint that holds the key write
     * inside the region until mem_dereg closes it (docs/security.md). */
    (void)peer;
    /* buf holds at least attr.max_rkey bytes (rail.h), whatever *len_p says */
    if (rail == NULL || memh == NULL || buf == NULL || len_p == NULL)
        return MADRAIL_ERR_INVALID;
    base = memh->addr;
    len = memh->len;
    flags = (rail->mr_mode & FI_MR_VIRT_ADDR) ? MDR_OFI_RKEY_VIRT : 0;
    memcpy(p, &memh->key, 8);
    memcpy(p + 8, &base, 8);
    memcpy(p + 16, &len, 8);
    memcpy(p + 24, &flags, 4);
    memcpy(p + 28, &pad, 4);
    *len_p = MDR_OFI_RKEY_LEN;
    return MADRAIL_OK;
}

/* Regions the core did not deregister before close. */
void mdr_ofi_mem_cleanup(mdr_rail_t *rail)
{
    mdr_list_t *l;

    while ((l = mdr_list_pop_head(&rail->memhs)) != NULL) {
        mdr_memh_t *memh = mdr_container_of(l, mdr_memh_t, link);
        fi_close(&memh->mr->fid);
        free(memh);
    }
}
