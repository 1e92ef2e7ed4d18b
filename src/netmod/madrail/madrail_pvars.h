/*
 * madrail ch4 netmod: MPI_T performance variables per rail
 * (madrail_pvars.c).  Included only by madrail_init.c and madrail_pvars.c:
 * not by the headers every MPICH object includes.
 */

#ifndef MADRAIL_PVARS_H_INCLUDED
#define MADRAIL_PVARS_H_INCLUDED

/* values of the madrail_railN_state pvars (MPI_T enum "madrail_rail_state") */
#define MPIDI_MADRAIL_RAIL_UP          0
#define MPIDI_MADRAIL_RAIL_PARTLY_DOWN 1
#define MPIDI_MADRAIL_RAIL_DOWN        2

/* Register the pvars of every rail of the open context (init_local). */
void MPIDI_MADRAIL_pvars_init(void);
/* Take the last values before the context closes (finalize hook); reads
 * after it return them. */
void MPIDI_MADRAIL_pvars_freeze(void);

#endif /* MADRAIL_PVARS_H_INCLUDED */
