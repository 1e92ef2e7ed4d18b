/*
 * mem_reg, mem_dereg and rkey_pack of the drivers whose puts are checked
 * in software at the target (tcp, shm, loop, and ucx's key checks): a
 * registration pins nothing, it files [addr, addr+len) in the rail's
 * region table (region.h) and the packed key is the region key.  Each
 * driver's handle embeds an mdr_region_t; these functions allocate and
 * free the whole handle, knowing only its size and where the region lies
 * in it, so a driver adds its own fields (a CMA mirror entry, a ucp
 * mapping, a reference count) around the shared part.
 */
#ifndef MDR_RAILS_SW_REG_H
#define MDR_RAILS_SW_REG_H

#include <stddef.h>
#include <stdint.h>

#include "rails/common/region.h"

#define MDR_SW_RKEY_LEN 8 /* the packed key: random tag << 32 | id */

/* mem_reg: check the range, allocate a zeroed handle of size bytes whose
 * mdr_region_t is at reg_off, file it in tab.  On success *memh_p is the
 * handle; on failure nothing is left and the error is logged (naming
 * log_name) unless it is MADRAIL_ERR_INVALID. */
madrail_status_t mdr_sw_reg_new(mdr_region_tab_t *tab, const char *log_name, void *addr,
                                size_t len, unsigned access, size_t size, size_t reg_off,
                                void **memh_p);
/* mem_dereg's check: is r filed in tab?  If not, logged ("mem_dereg of an
 * unknown handle") and 0. */
int mdr_sw_reg_known(const mdr_region_tab_t *tab, const mdr_region_t *r, const char *log_name);
/* rkey_pack: bind r (owned by tab) to the peer of uuid peer and write its
 * key into buf, MDR_SW_RKEY_LEN bytes. */
madrail_status_t mdr_sw_rkey_pack(const mdr_region_tab_t *tab, mdr_region_t *r, uint64_t peer,
                                  void *buf, size_t *len_p);

#endif /* MDR_RAILS_SW_REG_H */
