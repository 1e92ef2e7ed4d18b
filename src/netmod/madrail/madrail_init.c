/*
 * madrail ch4 netmod: start-up and shut-down.
 *
 * Why it is built this way:
 *  - init_local opens the libmadrail context (its rails) before anything is
 *    known about the job; MPIR_CVAR_CH4_MADRAIL_RAILS, when set, overrides
 *    MADRAIL_RAILS through madrail_context_params_t.overrides.
 *  - init_world first gives every rank the job key: rank 0 broadcasts its
 *    own through PMI (MPIR_pmi_bcast: put, fence, get) unless it came from
 *    MADRAIL_JOB_KEY, and each rank whose key is libmadrail's random one
 *    takes it, before any business card exists, so no rank can reach
 *    another's rails before both hold the key.  Then it publishes the
 *    context's address (every rail's) as the business card through PMI
 *    (MPIDU_bc_table_create, as ch4:ucx) and adds every other rank as a
 *    libmadrail peer; libmadrail connects lazily, so a large job opens only
 *    the connections it uses.
 *  - MPI_Finalize must not leave a process blocked in PMI while a message
 *    it sent still sits in one of its queues (an unopened connection, a
 *    coalescing buffer) and a peer waits for it in MPI.  So the finalize
 *    hook first finishes its own transfers, then runs a barrier made of
 *    libmadrail synchronous sends while driving progress (all ranks stay
 *    in progress until all have reached finalize, and every barrier message
 *    was matched), and only then enters the PMI barrier and closes the
 *    context (which flushes and, with MADRAIL_STATS=1, prints per-rail
 *    statistics).
 */

#include "mpidimpl.h"
#include "madrail_impl.h"
#include "madrail_pvars.h"
#include "mpidu_bc.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

categories :
    - name : CH4_MADRAIL
      description : A category for CH4 madrail netmod variables

cvars:
    - name        : MPIR_CVAR_CH4_MADRAIL_RAILS
      category    : CH4_MADRAIL
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Rails the madrail netmod opens, in libmadrail's MADRAIL_RAILS syntax
        (e.g. "tcp:eth0,tcp:eth1").  Empty (the default): MADRAIL_RAILS from
        the environment, else libmadrail's default.

    - name        : MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE
      category    : CH4_MADRAIL
      type        : int
      default     : 1048576
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes per chunk when the madrail netmod pipelines a large message of
        non-contiguous (or device) data: the sender packs and sends chunk by
        chunk, the receiver unpacks each while the next ones travel.  From
        4096 to 1073741824; larger messages of contiguous host data go in one
        piece, striped over the rails.

    - name        : MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH
      category    : CH4_MADRAIL
      type        : int
      default     : 4
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Chunks of one pipelined message in flight at once (1 to 16); each
        side stages at most this many chunks.

    - name        : MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P
      category    : CH4_MADRAIL
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        true (the default): the madrail netmod sends and receives MPI
        point-to-point messages as libmadrail tagged messages, matched by
        libmadrail (context id, source rank and tag in the match bits).
        false: as MPIDIG active messages matched by MPIDIG (the netmod's
        earlier path, kept for comparison).  Every rank must use the same
        value.  Without shared memory (--with-ch4-shmmods=none) the netmod
        always uses MPIDIG.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* The inline build (-DNETMOD_INLINE=__netmod_inline_madrail__) must have
 * included this netmod's netmod_inline.h; an unpatched gen_ch4_api.py
 * silently includes stubnm's instead. */
#if defined(NETMOD_INLINE) && !defined(MPIDI_MADRAIL_NETMOD_INLINE_INCLUDED)
#error "ch4 inline netmod dispatch did not include madrail/netmod_inline.h (maint/gen_ch4_api.py not patched?)"
#endif

/* One libmadrail context, serialized by the global critical section. */
#if MPICH_THREAD_GRANULARITY != MPICH_THREAD_GRANULARITY__GLOBAL && \
    MPICH_THREAD_GRANULARITY != MPICH_THREAD_GRANULARITY__SINGLE
#error "ch4:madrail needs --enable-thread-cs=global"
#endif

#define MADRAIL_CALL_ERR(mpi_errno_, fn_, st_)                                  \
    MPIR_ERR_SETANDSTMT2(mpi_errno_, MPI_ERR_OTHER, goto fn_fail, "**madrail_call", \
                         "**madrail_call %s %s", fn_, madrail_status_str(st_))

static uint32_t *rank_to_peer_ptr(int rank)
{
    return &MPIDI_MADRAIL_AV(&MPIDIU_get_av(0, rank)).peer;
}

int MPIDI_MADRAIL_init_local(int *tag_bits)
{
    int mpi_errno = MPI_SUCCESS;
    madrail_context_params_t params;
    madrail_status_t st;
    MPI_Aint am_max;

    MPIR_FUNC_ENTER;

    memset(&MPIDI_MADRAIL_global, 0, sizeof(MPIDI_MADRAIL_global));
    MPIDI_MADRAIL_global.rank = MPIR_Process.rank;
    MPIDI_MADRAIL_global.size = MPIR_Process.size;

    if (MPIR_CVAR_CH4_MADRAIL_RAILS && MPIR_CVAR_CH4_MADRAIL_RAILS[0]) {
        size_t len = strlen("MADRAIL_RAILS=") + strlen(MPIR_CVAR_CH4_MADRAIL_RAILS) + 1;
        MPIDI_MADRAIL_global.rails_override = MPL_malloc(len, MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(MPIDI_MADRAIL_global.rails_override == NULL, mpi_errno,
                            MPI_ERR_OTHER, "**nomem");
        snprintf(MPIDI_MADRAIL_global.rails_override, len, "MADRAIL_RAILS=%s",
                 MPIR_CVAR_CH4_MADRAIL_RAILS);
        MPIDI_MADRAIL_global.overrides[0] = MPIDI_MADRAIL_global.rails_override;
    }
    MPIDI_MADRAIL_global.overrides[1] = NULL;
    memset(&params, 0, sizeof(params));
    params.overrides = MPIDI_MADRAIL_global.overrides;

    st = madrail_context_init(&params, &MPIDI_MADRAIL_global.ctx);
    MPIR_ERR_CHKANDJUMP1(st != MADRAIL_OK, mpi_errno, MPI_ERR_OTHER, "**madrail_init",
                         "**madrail_init %s", madrail_status_str(st));
    st = madrail_am_set_handler(MPIDI_MADRAIL_global.ctx, MPIDI_MADRAIL_am_handler, NULL);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_am_set_handler", st);
    /* bounds the peers that connections from unknown processes can create */
    st = madrail_context_set_job_size(MPIDI_MADRAIL_global.ctx, (uint32_t) MPIR_Process.size);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_context_set_job_size", st);

    /* One active message carries header + eager data; MPIDIG must be able to
     * buffer an unexpected eager message (MPIDIG_am_check_init). */
    am_max = (MPI_Aint) madrail_am_max(MPIDI_MADRAIL_global.ctx);
    if (am_max > MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE)
        am_max = MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE;
    am_max &= ~(MPI_Aint) 7;
    MPIR_ERR_CHKANDJUMP1(am_max < 256, mpi_errno, MPI_ERR_OTHER, "**madrail_init",
                         "**madrail_init %s", "active messages smaller than 256 bytes "
                         "(MADRAIL_SLOT_SIZE too small)");
    MPIDI_MADRAIL_global.am_max = am_max;
    /* a LARGE announcement is the header and its descriptor */
    /* a LARGE header travels with its descriptor before the AM id in an
     * RTS (madrail_am_isend: at most madrail_am_max() - 8 bytes) */
    MPIDI_MADRAIL_global.hdr_max = am_max - (MPI_Aint) sizeof(MPIDI_MADRAIL_large_t) - 8;
    MPIR_ERR_CHKANDJUMP2(MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE < 4096 ||
                         MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE > (1 << 30), mpi_errno,
                         MPI_ERR_OTHER, "**madrail_cvar", "**madrail_cvar %s %d",
                         "MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE (4096 to 1073741824)",
                         MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE);
    MPIR_ERR_CHKANDJUMP2(MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH < 1 ||
                         MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH > MPIDI_MADRAIL_PIPE_DEPTH_MAX,
                         mpi_errno, MPI_ERR_OTHER, "**madrail_cvar", "**madrail_cvar %s %d",
                         "MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH (1 to 16)",
                         MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH);
    MPIDI_MADRAIL_global.pipe_chunk = MPIR_CVAR_CH4_MADRAIL_PIPELINE_CHUNK_SIZE;
    MPIDI_MADRAIL_global.pipe_depth = MPIR_CVAR_CH4_MADRAIL_PIPELINE_DEPTH;
    MPIDI_MADRAIL_global.pack_scratch = MPL_malloc(am_max, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(MPIDI_MADRAIL_global.pack_scratch == NULL, mpi_errno, MPI_ERR_OTHER,
                        "**nomem");

    /* Native point-to-point packs the communicator rank into 20 match
     * bits; ch4 sends a message to self through the netmod only without
     * shared memory, and libmadrail has no self peer. */
    MPIDI_MADRAIL_global.native = MPIR_CVAR_CH4_MADRAIL_NATIVE_P2P;
#ifdef MPIDI_CH4_DIRECT_NETMOD
    MPIDI_MADRAIL_global.native = 0;
#endif
    if (MPIDI_MADRAIL_global.native &&
        MPIR_Process.size > ((int64_t) 1 << MPIDI_MADRAIL_P2P_RANK_BITS)) {
        if (MPIR_Process.rank == 0)
            fprintf(stderr, "madrail netmod: %d processes need more than %d rank bits: "
                    "point-to-point goes through MPIDIG\n", MPIR_Process.size,
                    MPIDI_MADRAIL_P2P_RANK_BITS);
        MPIDI_MADRAIL_global.native = 0;
    }
    *tag_bits = MPIDI_MADRAIL_global.native ? MPIDI_MADRAIL_P2P_TAG_BITS : MPIR_TAG_BITS_DEFAULT;

    MPIDI_MADRAIL_pvars_init();

    if (MPIR_CVAR_DEBUG_SUMMARY && MPIR_Process.rank == 0) {
        int i, n = madrail_rail_count(MPIDI_MADRAIL_global.ctx);
        printf("==== madrail netmod ====\n");
        printf("rails: %d\n", n);
        for (i = 0; i < n; i++) {
            madrail_rail_info_t info;
            if (madrail_rail_info(MPIDI_MADRAIL_global.ctx, i, &info) == MADRAIL_OK)
                printf("  rail %d: %s (%s) weight %.2f\n", i, info.name, info.driver,
                       info.weight);
        }
        printf("point-to-point: %s\n", MPIDI_MADRAIL_global.native ?
               "native (libmadrail tagged messages)" : "MPIDIG active messages");
        printf("active message: %ld bytes, header max %ld bytes\n",
               (long) MPIDI_MADRAIL_global.am_max, (long) MPIDI_MADRAIL_global.hdr_max);
        printf("========================\n");
    }

  fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    if (MPIDI_MADRAIL_global.ctx) {
        madrail_context_finalize(MPIDI_MADRAIL_global.ctx);
        MPIDI_MADRAIL_global.ctx = NULL;
    }
    MPL_free(MPIDI_MADRAIL_global.pack_scratch);
    MPIDI_MADRAIL_global.pack_scratch = NULL;
    MPL_free(MPIDI_MADRAIL_global.rails_override);
    MPIDI_MADRAIL_global.rails_override = NULL;
    goto fn_exit;
}

static int add_peer(int rank, const void *card, int card_len)
{
    int mpi_errno = MPI_SUCCESS;
    madrail_peer_t peer;
    madrail_status_t st;

    if (rank == MPIR_Process.rank) {
        *rank_to_peer_ptr(rank) = MPIDI_MADRAIL_PEER_SELF;
        goto fn_exit;
    }
    st = madrail_peer_add(MPIDI_MADRAIL_global.ctx, card, (size_t) card_len, &peer);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_peer_add", st);
    *rank_to_peer_ptr(rank) = (uint32_t) peer;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Rank 0's job key to every rank (collective over the job: every rank
 * takes part in the broadcast whatever its own key's origin). */
static int share_job_key(void)
{
    int mpi_errno = MPI_SUCCESS;
    unsigned char buf[1 + MADRAIL_JOB_KEY_LEN];
    madrail_job_key_origin_t origin;
    madrail_status_t st;

    if (MPIR_Process.size == 1)
        goto fn_exit;
    st = madrail_context_job_key(MPIDI_MADRAIL_global.ctx, buf + 1, &origin);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_context_job_key", st);
    /* buf[0]: 1 when rank 0 shares its key, 0 when its key came from
     * MADRAIL_JOB_KEY (which every rank then has from the launcher) */
    buf[0] = origin == MADRAIL_JOB_KEY_RANDOM;
    if (!buf[0])
        memset(buf + 1, 0, MADRAIL_JOB_KEY_LEN);
    mpi_errno = MPIR_pmi_bcast(buf, (int) sizeof(buf), MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    if (MPIR_Process.rank != 0 && origin == MADRAIL_JOB_KEY_RANDOM) {
        MPIR_ERR_CHKANDJUMP1(!buf[0], mpi_errno, MPI_ERR_OTHER, "**madrail_init",
                             "**madrail_init %s", "rank 0 has MADRAIL_JOB_KEY and this rank "
                             "has none: give every rank the same MADRAIL_JOB_KEY");
        st = madrail_context_set_job_key(MPIDI_MADRAIL_global.ctx, buf + 1,
                                         MADRAIL_JOB_KEY_LEN);
        if (st != MADRAIL_OK)
            MADRAIL_CALL_ERR(mpi_errno, "madrail_context_set_job_key", st);
    }

  fn_exit:
    memset(buf, 0, sizeof(buf));
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_init_world(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rank = MPIR_Process.rank, size = MPIR_Process.size;
    size_t addr_len = 0;
    char *addr = NULL;
    void *table = NULL;
    int recv_bc_len = 0;
    int have_table = 0;
    madrail_status_t st;

    MPIR_FUNC_ENTER;

    mpi_errno = share_job_key();
    MPIR_ERR_CHECK(mpi_errno);

    st = madrail_context_address(MPIDI_MADRAIL_global.ctx, NULL, &addr_len);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_context_address", st);
    MPIR_ERR_CHKANDJUMP1(addr_len > MPID_MAX_BC_SIZE, mpi_errno, MPI_ERR_OTHER,
                         "**madrail_init", "**madrail_init %s",
                         "address larger than a business card");
    addr = MPL_malloc(addr_len, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(addr == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    st = madrail_context_address(MPIDI_MADRAIL_global.ctx, addr, &addr_len);
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_context_address", st);

    /* Cards may differ in length (rails differ between hosts): fixed
     * MPID_MAX_BC_SIZE slots; libmadrail ignores the bytes after a card.
     * MPIR_CVAR_CH4_ROOTS_ONLY_PMI is not honoured: with cards of varying
     * length, 4.0.2's MPIDU_bc_allgather sends MPID_MAX_BC_SIZE bytes per
     * rank but receives bc_len, so every rank publishes its own card. */
    mpi_errno = MPIDU_bc_table_create(rank, size, MPIR_Process.node_map, addr, (int) addr_len,
                                      FALSE, FALSE, &table, &recv_bc_len);
    MPIR_ERR_CHECK(mpi_errno);
    have_table = 1;

    for (int i = 0; i < size; i++) {
        mpi_errno = add_peer(i, (char *) table + i * recv_bc_len, recv_bc_len);
        MPIR_ERR_CHECK(mpi_errno);
    }

  fn_exit:
    if (have_table)
        MPIDU_bc_table_destroy();
    MPL_free(addr);
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_post_init(void)
{
    return MPI_SUCCESS;
}

/* Dissemination barrier of zero-byte sends: on return every rank has
 * reached this point (the receives carry that), and this process's barrier
 * messages have left it (a libmadrail send completes once its bytes left).
 * Not synchronous sends: their acknowledgement is a reply the receiver
 * sends after matching, and a receiver that left the barrier and blocked
 * in the PMI barrier without progress could leave that reply queued, its
 * sender waiting for it for ever (seen once in the MPICH suite, coll
 * p_exscan, 5 ranks: one rank in this loop with MDR_ACK_WAIT, four in
 * MPIR_pmi_barrier). */
static int finalize_barrier(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rank = MPIDI_MADRAIL_global.rank, size = MPIDI_MADRAIL_global.size;
    madrail_request_t rreqs[32], sreqs[32];
    static uint64_t sink[2];
    int nrounds = 0, k;
    madrail_status_t st;

    for (int d = 1; d < size; d <<= 1)
        nrounds++;
    for (k = 0; k < nrounds; k++) {
        int from = (rank - (1 << k) % size + size) % size;
        st = madrail_irecv(MPIDI_MADRAIL_global.ctx, *rank_to_peer_ptr(from), &sink[0], 0,
                           MPIDI_MADRAIL_TAG_BARRIER | (uint64_t) k, MADRAIL_TAG_EXACT,
                           &rreqs[k]);
        if (st != MADRAIL_OK)
            MADRAIL_CALL_ERR(mpi_errno, "madrail_irecv", st);
    }
    for (k = 0; k < nrounds; k++) {
        int to = (rank + (1 << k)) % size;
        int done = 0;
        st = madrail_isend(MPIDI_MADRAIL_global.ctx, *rank_to_peer_ptr(to), &sink[1], 0,
                           MPIDI_MADRAIL_TAG_BARRIER | (uint64_t) k, 0, &sreqs[k]);
        if (st != MADRAIL_OK)
            MADRAIL_CALL_ERR(mpi_errno, "madrail_isend", st);
        while (!done) {
            mpi_errno = MPIDI_MADRAIL_progress(0, 0);
            MPIR_ERR_CHECK(mpi_errno);
            st = madrail_test(&rreqs[k], &done, NULL);
            if (st != MADRAIL_OK)
                MADRAIL_CALL_ERR(mpi_errno, "madrail_test", st);
        }
    }
    for (k = 0; k < nrounds; k++) {
        int done = 0;
        while (!done) {
            mpi_errno = MPIDI_MADRAIL_progress(0, 0);
            MPIR_ERR_CHECK(mpi_errno);
            st = madrail_test(&sreqs[k], &done, NULL);
            if (st != MADRAIL_OK)
                MADRAIL_CALL_ERR(mpi_errno, "madrail_test", st);
        }
    }

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_MADRAIL_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;
    madrail_status_t st;
    int idle;

    MPIR_FUNC_ENTER;

    if (MPIDI_MADRAIL_global.ctx == NULL)
        goto fn_exit;

    /* 1. our own transfers */
    mpi_errno = MPIDI_MADRAIL_drain();
    MPIR_ERR_CHECK(mpi_errno);

    /* 2. everyone is here, and everything sent before it was delivered */
    if (MPIDI_MADRAIL_global.size > 1) {
        mpi_errno = finalize_barrier();
        MPIR_ERR_CHECK(mpi_errno);
        /* replies produced by the last matches (the synchronous-send
         * acknowledgements) leave with the next progress calls */
        MPIDI_MADRAIL_global.progress_depth++;
        for (idle = 0; idle < 3;)
            idle = madrail_progress(MPIDI_MADRAIL_global.ctx) ? 0 : idle + 1;
        MPIDI_MADRAIL_global.progress_depth--;
    }

    /* 3. nobody needs our progress any more: wait for all, then close */
    mpi_errno = MPIR_pmi_barrier();
    MPIR_ERR_CHECK(mpi_errno);

    MPIDI_MADRAIL_pvars_freeze();
    st = madrail_context_finalize(MPIDI_MADRAIL_global.ctx);
    MPIDI_MADRAIL_global.ctx = NULL;
    if (st != MADRAIL_OK)
        MADRAIL_CALL_ERR(mpi_errno, "madrail_context_finalize", st);

  fn_exit:
    MPL_free(MPIDI_MADRAIL_global.pack_scratch);
    MPIDI_MADRAIL_global.pack_scratch = NULL;
    MPL_free(MPIDI_MADRAIL_global.rails_override);
    MPIDI_MADRAIL_global.rails_override = NULL;
    MPIR_FUNC_EXIT;
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

void *MPIDI_MADRAIL_mpi_alloc_mem(MPI_Aint size, MPIR_Info * info_ptr)
{
    return MPIDIG_mpi_alloc_mem(size, info_ptr);
}

int MPIDI_MADRAIL_mpi_free_mem(void *ptr)
{
    return MPIDIG_mpi_free_mem(ptr);
}
