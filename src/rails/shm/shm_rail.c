/*
 * The shm driver: rails between processes of one node through POSIX shared
 * memory, with no thread and no system call on the message path: the core
 * calls progress(), which looks at the rings (see shm.h for the layout).
 *
 * One rail = one segment, created at open and unlinked at close.  A process
 * that crashes cannot unlink, so the segment name carries the pid namespace,
 * the pid and the process start time: every rail open removes the segments
 * of processes of its pid namespace that no longer exist (or whose pid now
 * belongs to another process), and a peer that sees a process die unlinks
 * that process's segment at once.  Nothing else is left behind.
 *
 * Connections are lazy: ep_create only maps the peer's segment (it fails
 * at once for a peer on another node: the address carries a node id).  The
 * first ctrl_send or put claims the sending ring in the peer's segment; the
 * peer's progress notices the claim (a counter in its header changes),
 * attaches the ring to the endpoint it has for that uuid or offers a new
 * one to the core with ep_accepted.  A refusal, a close, an error on either
 * side is a flag in the ring's control block, read by the other side's
 * progress; a peer that dies is noticed through a pidfd (kill(pid, 0) where
 * pidfds do not exist) checked every MADRAIL_SHM_PEER_CHECK.
 *
 * A claim carries the job key, checked before anything else of it: a
 * process of another job is answered as by a closed connection (no reason,
 * and the key it wrote is wiped).  This keeps jobs apart; it is no barrier
 * against a process of the same user, which can open the segments (0600)
 * and read or write them, or write into this process (docs/security.md).
 *
 * Puts are a single copy with process_vm_writev (CMA) when the kernel lets
 * this process write into the peer (probed at open; a pair that is denied,
 * e.g. by Yama's ptrace_scope=1, falls back silently, per endpoint), else
 * a copy through the ring in fragments that the receiver places after
 * checking the key, as the tcp driver's software put does.
 */
#include "mdr_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rails/common/drv.h"
#include "rails/shm/shm.h"
#include "util/clock.h"
#include "util/log.h"

/* ---------------- process facts ---------------- */

/* Start time (field 22 of /proc/<pid>/stat) and state letter; 0 on success. */
static int mdr_shm_proc_stat(pid_t pid, uint64_t *start_p, char *state_p)
{
    char path[64], buf[1024], *p, *save = NULL, *tok;
    unsigned long long start = 0;
    ssize_t n;
    int fd, field;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (p == NULL)
        return -1;
    for (field = 3, tok = strtok_r(p + 1, " ", &save); tok != NULL;
         field++, tok = strtok_r(NULL, " ", &save)) {
        if (field == 3 && state_p != NULL)
            *state_p = tok[0];
        if (field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (tok == NULL)
        return -1;
    *start_p = start;
    return 0;
}

int mdr_shm_proc_start(pid_t pid, uint64_t *start_p)
{
    return mdr_shm_proc_stat(pid, start_p, NULL);
}

/* 1 if pid is (still) the process that started at start. */
static int mdr_shm_pid_alive(pid_t pid, uint64_t start)
{
    uint64_t s;
    char state = '?';

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    if (mdr_shm_proc_stat(pid, &s, &state) != 0)
        return errno == ENOENT ? 0 : 1; /* no /proc: trust kill() */
    return s == start && state != 'Z' && state != 'X';
}

static uint64_t mdr_shm_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

/* Processes reach each other through this driver iff they share the
 * kernel (boot id), the /dev/shm mount and the pid namespace. */
static uint64_t mdr_shm_node_id(uint64_t *pidns_p)
{
    char boot[64] = "";
    struct stat st;
    uint64_t h = 0x6d6472736d6ull;
    size_t i;
    int fd;
    ssize_t n;

    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, boot, sizeof(boot) - 1);
        boot[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    if (boot[0] == '\0')
        gethostname(boot, sizeof(boot) - 1);
    for (i = 0; boot[i] != '\0'; i++)
        h = mdr_shm_mix(h, (uint8_t)boot[i]);
    if (stat(MDR_SHM_DIR, &st) == 0)
        h = mdr_shm_mix(mdr_shm_mix(h, st.st_dev), st.st_ino);
    *pidns_p = 0;
    if (stat("/proc/self/ns/pid", &st) == 0) {
        *pidns_p = st.st_ino;
        h = mdr_shm_mix(h, st.st_ino);
    }
    return h;
}

/* ---------------- segments ---------------- */

void mdr_shm_seg_name(char *buf, uint64_t pidns, pid_t pid, uint64_t start, uint64_t tag)
{
    snprintf(buf, MDR_SHM_NAME_MAX, "/" MDR_SHM_PREFIX "%llx-%d-%llu-%016llx",
             (unsigned long long)pidns, (int)pid, (unsigned long long)start,
             (unsigned long long)tag);
}

mdr_shm_ring_ctl_t *mdr_shm_ring_ctl(void *base, const mdr_shm_layout_t *lay, uint32_t i)
{
    return (mdr_shm_ring_ctl_t *)((uint8_t *)base + lay->ctl_off +
                                  (uint64_t)i * sizeof(mdr_shm_ring_ctl_t));
}

/* A header read from a peer's segment (a private copy: the peer may write
 * the shared one meanwhile) describes a layout inside len.  Each offset is
 * bounded by len before any sum, so that no sum below can wrap (an offset
 * near 2^64 plus a table size used to wrap to a small number and pass). */
static int mdr_shm_hdr_sane(const mdr_shm_seg_hdr_t *h, size_t len)
{
    uint64_t end;

    if (h->magic != MDR_SHM_MAGIC || h->version != MDR_SHM_VERSION || h->nrings == 0 ||
        h->nrings > 65535 || h->ring_bytes < MDR_SHM_PAGE || h->ring_bytes > (1ull << 32) ||
        (h->ring_bytes & 7) != 0 || h->nregs > (1u << 20))
        return 0;
    if (h->reg_off > len || h->ctl_off > len || h->data_off > len)
        return 0;
    if (h->reg_off < sizeof(*h) || h->reg_off + (uint64_t)h->nregs * sizeof(mdr_shm_reg_ent_t) >
                                       h->ctl_off)
        return 0;
    if (h->ctl_off + (uint64_t)h->nrings * sizeof(mdr_shm_ring_ctl_t) > h->data_off)
        return 0;
    end = h->data_off + (uint64_t)h->nrings * h->ring_bytes;
    return end <= len && (h->data_off & (MDR_SHM_PAGE - 1)) == 0;
}

madrail_status_t mdr_shm_pseg_get(mdr_rail_t *rail, const char *name, uint64_t tag,
                                  uint64_t uuid, mdr_shm_pseg_t **pseg_p, const char **why_p)
{
    mdr_shm_seg_hdr_t h;
    mdr_shm_pseg_t *ps;
    struct stat st;
    mdr_list_t *l;
    int fd;
    void *base;

    mdr_list_for_each(l, &rail->psegs) {
        ps = mdr_container_of(l, mdr_shm_pseg_t, link);
        if (ps->tag == tag && strcmp(ps->name, name) == 0) {
            ps->refs++;
            *pseg_p = ps;
            return MADRAIL_OK;
        }
    }
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        *why_p = errno == ENOENT ? "the peer's segment does not exist (peer gone?)"
                                 : "cannot open the peer's segment";
        mdr_debug("rail %s: shm_open(%s): %m", rail->log_name, name);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < MDR_SHM_PAGE) {
        *why_p = "the peer's segment is too small";
        close(fd);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        mdr_warn("rail %s: mmap of %s (%lld bytes): %m", rail->log_name, name,
                 (long long)st.st_size);
        *why_p = "cannot map the peer's segment";
        close(fd);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    /* checked and used from a private copy (the atomics are not used) */
    memcpy(&h, base, sizeof(h));
    if (!mdr_shm_hdr_sane(&h, (size_t)st.st_size) || h.tag != tag ||
        (uuid != 0 && h.uuid != uuid)) {
        *why_p = "the peer's segment is not the one its address names";
        munmap(base, (size_t)st.st_size);
        close(fd);
        return MADRAIL_ERR_RAIL_DOWN;
    }
    ps = calloc(1, sizeof(*ps));
    if (ps == NULL) {
        munmap(base, (size_t)st.st_size);
        close(fd);
        *why_p = "out of memory";
        return MADRAIL_ERR_NOMEM;
    }
    ps->refs = 1;
    ps->tag = tag;
    ps->fd = fd;
    ps->base = base;
    ps->len = (size_t)st.st_size;
    ps->hdr = base;
    ps->lay.ctl_off = h.ctl_off;
    ps->lay.data_off = h.data_off;
    ps->lay.ring_bytes = h.ring_bytes;
    ps->lay.reg_off = h.reg_off;
    ps->lay.nrings = h.nrings;
    ps->lay.nregs = h.nregs;
    snprintf(ps->name, sizeof(ps->name), "%s", name);
    mdr_list_push_tail(&rail->psegs, &ps->link);
    *pseg_p = ps;
    return MADRAIL_OK;
}

void mdr_shm_pseg_put(mdr_rail_t *rail, mdr_shm_pseg_t *ps)
{
    (void)rail;
    if (ps == NULL || --ps->refs > 0)
        return;
    mdr_list_del(&ps->link);
    munmap(ps->base, ps->len);
    close(ps->fd);
    free(ps);
}

/* Give ring i of our segment back (its producer is gone or closed). */
void mdr_shm_ring_release(mdr_rail_t *rail, uint32_t i)
{
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);

    if (rail->rx_state[i] == MDR_SHM_RX_ZOMBIE && rail->nzombies > 0)
        rail->nzombies--;
    rail->rx_state[i] = MDR_SHM_RX_UNKNOWN;
    rail->rx_eps[i] = NULL;
    /* the data pages go back to the system until the next claim */
    (void)fallocate(rail->seg_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)(rail->lay.data_off + (uint64_t)i * rail->ring_bytes),
                    (off_t)rail->ring_bytes);
    atomic_store_explicit(&c->tail, 0, memory_order_relaxed);
    atomic_store_explicit(&c->head, 0, memory_order_relaxed);
    atomic_store_explicit(&c->prod_flags, 0, memory_order_relaxed);
    atomic_store_explicit(&c->cons_flags, 0, memory_order_relaxed);
    c->prod_uuid = 0;
    c->prod_pid = 0;
    atomic_store_explicit(&c->state, MDR_SHM_MKSTATE(MDR_SHM_RING_FREE, 0),
                          memory_order_release);
}

/* Remove segments of dead processes of our pid namespace from /dev/shm. */
static void mdr_shm_clean_stale(mdr_rail_t *rail, uint64_t pidns)
{
    char prefix[64], name[sizeof(((struct dirent *)0)->d_name) + 2];
    unsigned long long start;
    struct dirent *de;
    struct stat st;
    size_t plen;
    DIR *d;
    int pid, n;

    d = opendir(MDR_SHM_DIR);
    if (d == NULL)
        return;
    snprintf(prefix, sizeof(prefix), MDR_SHM_PREFIX "%llx-", (unsigned long long)pidns);
    plen = strlen(prefix);
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, plen) != 0)
            continue;
        n = 0;
        if (sscanf(de->d_name + plen, "%d-%llu-%*x%n", &pid, &start, &n) != 2 || n == 0 ||
            pid <= 0)
            continue;
        if (pid == (int)rail->pid && start == rail->start)
            continue; /* another rail of this process */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            st.st_uid != geteuid())
            continue;
        if (mdr_shm_pid_alive(pid, start))
            continue;
        snprintf(name, sizeof(name), "/%s", de->d_name);
        if (shm_unlink(name) == 0)
            mdr_info("rail %s: removed %s/%s, left by process %d which no longer exists",
                     rail->log_name, MDR_SHM_DIR, de->d_name, pid);
    }
    closedir(d);
}

/* ---------------- CMA probe ---------------- */

static int mdr_shm_cma_probe(mdr_rail_t *rail, const char **why_p)
{
#ifdef HAVE_PROCESS_VM_WRITEV
    char src[16] = "madrail-cma-ok", dst[16] = "";
    struct iovec l = {src, sizeof(src)}, r = {dst, sizeof(dst)};
    char buf[16] = "";
    ssize_t n;
    int fd;

    fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        if (buf[0] >= '2') {
            *why_p = "Yama ptrace_scope >= 2 forbids process_vm_writev";
            return 0;
        }
        if (buf[0] == '1')
            mdr_debug("rail %s: Yama ptrace_scope=1: CMA only reaches descendants; other "
                      "peers fall back to the copy path",
                      rail->log_name);
    }
    n = process_vm_writev(getpid(), &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof(src) || memcmp(src, dst, sizeof(src)) != 0) {
        *why_p = n < 0 && (errno == ENOSYS || errno == EPERM)
                     ? "process_vm_writev is not permitted here"
                     : "process_vm_writev test call failed";
        mdr_debug("rail %s: process_vm_writev probe: %m", rail->log_name);
        return 0;
    }
    return 1;
#else
    (void)rail;
    *why_p = "built without process_vm_writev";
    return 0;
#endif
}

/* ---------------- spec ---------------- */

typedef struct mdr_shm_opts {
    const char *spec;
    int cma; /* -1: from the configuration */
} mdr_shm_opts_t;

static madrail_status_t mdr_shm_opt(const char *key, const char *val, void *arg)
{
    mdr_shm_opts_t *o = arg;
    const char *why = NULL;
    int b;

    if (strcmp(key, "cma") == 0) {
        if (val[0] == '\0')
            b = 1;
        else if (mdr_cfg_parse_value(MDR_CFG_BOOL, val, &b, &why) != MADRAIL_OK) {
            mdr_error("rail spec shm:%s: cma=%s: %s (expected 0 or 1)", o->spec, val,
                      why ? why : "invalid");
            return MADRAIL_ERR_CONFIG;
        }
        o->cma = b;
        return MADRAIL_OK;
    }
    mdr_error("rail spec shm:%s: unknown option '%s' (known: cma)", o->spec, key);
    return MADRAIL_ERR_CONFIG;
}

static int mdr_shm_name_ok(const char *s)
{
    size_t i;

    if (strlen(s) > 31)
        return 0;
    for (i = 0; s[i] != '\0'; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* ---------------- open / close ---------------- */

static madrail_status_t mdr_shm_seg_create(mdr_rail_t *rail, uint64_t pidns)
{
    mdr_shm_seg_hdr_t *h;
    uint64_t reg_off, ctl_off, data_off, len;
    int tries;

    reg_off = MDR_SHM_PAGE;
    ctl_off = reg_off + (((uint64_t)MDR_SHM_NREGS * sizeof(mdr_shm_reg_ent_t) + MDR_SHM_PAGE - 1) &
                         ~(uint64_t)(MDR_SHM_PAGE - 1));
    data_off = ctl_off + (((uint64_t)rail->nrings * sizeof(mdr_shm_ring_ctl_t) + MDR_SHM_PAGE -
                           1) & ~(uint64_t)(MDR_SHM_PAGE - 1));
    len = data_off + (uint64_t)rail->nrings * rail->ring_bytes;

    for (tries = 0;; tries++) {
        if (getrandom(&rail->tag, sizeof(rail->tag), GRND_NONBLOCK) != (ssize_t)sizeof(rail->tag))
            rail->tag = mdr_shm_mix(mdr_time_ns(), (uint64_t)rail->pid << 20 ^ (uint64_t)tries);
        mdr_shm_seg_name(rail->seg_name, pidns, rail->pid, rail->start, rail->tag);
        rail->seg_fd = shm_open(rail->seg_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (rail->seg_fd >= 0)
            break;
        if (errno != EEXIST || tries >= 8) {
            mdr_error("rail %s: shm_open(%s): %m (is %s mounted and writable?)", rail->name,
                      rail->seg_name, MDR_SHM_DIR);
            return MADRAIL_ERR_IO;
        }
    }
    if (ftruncate(rail->seg_fd, (off_t)len) != 0) {
        mdr_error("rail %s: ftruncate(%s, %llu): %m", rail->name, rail->seg_name,
                  (unsigned long long)len);
        goto err_unlink;
    }
    /* The header, key table and ring control pages are touched by everyone:
     * allocate them now, so that a full /dev/shm is an error here rather
     * than a SIGBUS later.  Ring data is allocated by whoever claims it. */
    errno = fallocate(rail->seg_fd, 0, 0, (off_t)data_off) == 0 ? 0 : errno;
    if (errno != 0 && errno != EOPNOTSUPP) {
        mdr_error("rail %s: cannot allocate %llu bytes in %s: %m", rail->name,
                  (unsigned long long)data_off, MDR_SHM_DIR);
        goto err_unlink;
    }
    rail->seg_base = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, rail->seg_fd, 0);
    if (rail->seg_base == MAP_FAILED) {
        mdr_error("rail %s: mmap of %llu bytes: %m", rail->name, (unsigned long long)len);
        rail->seg_base = NULL;
        goto err_unlink;
    }
    rail->seg_len = (size_t)len;
    h = rail->seg_base;
    h->magic = MDR_SHM_MAGIC;
    h->version = MDR_SHM_VERSION;
    h->uuid = rail->uuid;
    h->tag = rail->tag;
    h->start = rail->start;
    h->pid = (int32_t)rail->pid;
    h->nrings = rail->nrings;
    h->reg_off = reg_off;
    h->nregs = MDR_SHM_NREGS;
    h->ctl_off = ctl_off;
    h->data_off = data_off;
    h->ring_bytes = rail->ring_bytes;
    rail->hdr = h;
    rail->lay.ctl_off = ctl_off;
    rail->lay.data_off = data_off;
    rail->lay.ring_bytes = rail->ring_bytes;
    rail->lay.reg_off = reg_off;
    rail->lay.nrings = rail->nrings;
    rail->lay.nregs = MDR_SHM_NREGS;
    rail->regtab = (mdr_shm_reg_ent_t *)((uint8_t *)rail->seg_base + reg_off);
    atomic_store_explicit(&h->alive, 1, memory_order_seq_cst);
    return MADRAIL_OK;

err_unlink:
    close(rail->seg_fd);
    rail->seg_fd = -1;
    shm_unlink(rail->seg_name);
    return MADRAIL_ERR_IO;
}

static madrail_status_t mdr_shm_open(const char *spec, const mdr_rail_params_t *params,
                                     mdr_rail_t **rail_p)
{
    mdr_shm_opts_t opts = {spec, -1};
    madrail_status_t st;
    const char *why = NULL;
    char *copy, *first = NULL;
    mdr_rail_t *rail;
    uint64_t need, pidns;

    if (!mdr_drv_open_args_ok(spec, params, rail_p, (size_t)1 << 30))
        return MADRAIL_ERR_INVALID;
    rail = calloc(1, sizeof(*rail));
    if (rail == NULL)
        return MADRAIL_ERR_NOMEM;
    rail->seg_fd = -1;
    rail->epfd = -1;
    st = mdr_cfg_parse(&mdr_shm_cfg_table, params->overrides, &rail->cfg);
    if (st != MADRAIL_OK)
        goto err_cfg;
    st = mdr_drv_spec_split(spec, mdr_shm_opt, &opts, &copy, &first);
    if (st != MADRAIL_OK)
        goto err_cfg;
    if (first == NULL || !mdr_shm_name_ok(first)) {
        mdr_error("rail spec shm:%s: the name must be 0..31 letters, digits, '_', '-' or '.'",
                  spec);
        st = MADRAIL_ERR_CONFIG;
    } else if (first[0] == '\0') {
        snprintf(rail->name, sizeof(rail->name), "shm");
    } else {
        snprintf(rail->name, sizeof(rail->name), "shm:%s", first);
    }
    free(copy);
    if (st != MADRAIL_OK)
        goto err_cfg;
    if (opts.cma >= 0)
        rail->cfg.cma = opts.cma;

    rail->uuid = params->uuid;
    rail->job_key = params->job_key;
    rail->upcalls = params->upcalls;
    rail->slot_size = params->slot_size;
    rail->slots = params->slots ? params->slots : 64;
    rail->pid = getpid();
    if (mdr_shm_proc_start(rail->pid, &rail->start) != 0) {
        mdr_error("rail %s: cannot read /proc/self/stat: %m", rail->name);
        st = MADRAIL_ERR_IO;
        goto err_cfg;
    }
    rail->node = mdr_shm_node_id(&pidns);
    rail->pidns = pidns;
    snprintf(rail->log_name, sizeof(rail->log_name), "%s(pid %d)", rail->name, (int)rail->pid);

    /* A ring holds every slot the core may fill at once, and more if asked. */
    need = (uint64_t)rail->slots * (MDR_SHM_PAD8(rail->slot_size) + MDR_SHM_REC_HDR);
    if (need < rail->cfg.ring_size)
        need = rail->cfg.ring_size;
    rail->ring_bytes = (need + MDR_SHM_PAGE - 1) & ~(uint64_t)(MDR_SHM_PAGE - 1);
    rail->frag = rail->cfg.frag;
    if (rail->frag > rail->ring_bytes / 4)
        rail->frag = rail->ring_bytes / 4;
    rail->frag &= ~(size_t)7;
    rail->nrings = rail->cfg.max_peers;

    mdr_list_init(&rail->psegs);
    st = mdr_rail_base_init(&rail->base, rail->log_name, params, mdr_shm_ep_free_base);
    if (st != MADRAIL_OK)
        goto err_cfg;
    rail->rx_eps = calloc(rail->nrings, sizeof(*rail->rx_eps));
    rail->rx_state = calloc(rail->nrings, 1);
    if (rail->rx_eps == NULL || rail->rx_state == NULL) {
        st = MADRAIL_ERR_NOMEM;
        goto err_arrays;
    }
    rail->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (rail->epfd < 0) {
        mdr_error("rail %s: epoll_create1: %m", rail->name);
        st = MADRAIL_ERR_IO;
        goto err_arrays;
    }

    mdr_shm_clean_stale(rail, pidns);
    st = mdr_shm_seg_create(rail, pidns);
    if (st != MADRAIL_OK)
        goto err_epoll;

    rail->cma = rail->cfg.cma ? mdr_shm_cma_probe(rail, &why) : 0;
    if (!rail->cfg.cma)
        why = "MADRAIL_SHM_CMA=0 or cma=0";
    rail->latency_us = rail->cfg.latency_us > 0 ? rail->cfg.latency_us : MDR_SHM_LATENCY_US;
    rail->bandwidth_mbs = rail->cfg.bandwidth > 0 ? rail->cfg.bandwidth
                          : rail->cma             ? MDR_SHM_BW_CMA
                                                  : MDR_SHM_BW_COPY;
    rail->next_check = mdr_time_sec() + rail->cfg.peer_check;
    mdr_debug("rail %s: segment %s%s, %u rings of %llu bytes, fragments %zu; puts: %s%s%s; "
              "profile %.2f us %.0f MB/s",
              rail->log_name, MDR_SHM_DIR, rail->seg_name, rail->nrings,
              (unsigned long long)rail->ring_bytes, rail->frag,
              rail->cma ? "single copy (CMA)" : "copied through the ring",
              rail->cma ? "" : " because ", rail->cma ? "" : why, rail->latency_us,
              rail->bandwidth_mbs);
    *rail_p = rail;
    return MADRAIL_OK;

err_epoll:
    close(rail->epfd);
err_arrays:
    free(rail->rx_eps);
    free(rail->rx_state);
    mdr_rail_base_cleanup(&rail->base);
err_cfg:
    mdr_cfg_release(&mdr_shm_cfg_table, &rail->cfg);
    free(rail);
    return st;
}

static void mdr_shm_reap(mdr_rail_t *rail)
{
    mdr_rail_base_reap(&rail->base);
}

static void mdr_shm_close(mdr_rail_t *rail)
{
    mdr_list_t *l;
    uint32_t i;

    if (rail == NULL || mdr_drv_close_refused(rail->base.in_progress, rail->log_name))
        return;
    /* Claims from now on see a dead segment (and re-check it after claiming). */
    atomic_store_explicit(&rail->hdr->alive, 0, memory_order_seq_cst);
    while (!mdr_list_empty(&rail->base.eps_all))
        mdr_shm_ep_destroy(mdr_container_of(rail->base.eps_all.next, mdr_ep_t, base.link));
    mdr_shm_reap(rail);
    for (i = 0; i < rail->nrings; i++) {
        mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);
        if (MDR_SHM_STATE(atomic_load_explicit(&c->state, memory_order_seq_cst)) !=
            MDR_SHM_RING_FREE)
            atomic_fetch_or_explicit(&c->cons_flags, MDR_SHM_F_CLOSED, memory_order_release);
    }
    while ((l = mdr_list_pop_head(&rail->psegs)) != NULL) {
        mdr_shm_pseg_t *ps = mdr_container_of(l, mdr_shm_pseg_t, link);
        mdr_list_init(&ps->link);
        ps->refs = 1;
        mdr_shm_pseg_put(rail, ps);
    }
    munmap(rail->seg_base, rail->seg_len);
    close(rail->seg_fd);
    if (shm_unlink(rail->seg_name) != 0)
        mdr_warn("rail %s: shm_unlink(%s): %m", rail->log_name, rail->seg_name);
    close(rail->epfd);
    mdr_shm_mem_cleanup(rail);
    mdr_rail_base_cleanup(&rail->base);
    free(rail->rx_eps);
    free(rail->rx_state);
    free(rail->scan);
    mdr_cfg_release(&mdr_shm_cfg_table, &rail->cfg);
    free(rail);
}

static void mdr_shm_query(mdr_rail_t *rail, mdr_rail_attr_t *attr)
{
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->name, sizeof(attr->name), "%s", rail->name);
    attr->caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP | (rail->cma ? MDR_RAIL_CAP_CMA : 0);
    attr->latency_us = rail->latency_us;
    attr->bandwidth_mbs = rail->bandwidth_mbs;
    attr->max_ctrl = rail->slot_size;
    attr->addr_len = sizeof(mdr_shm_addr_t);
    attr->max_rkey = sizeof(mdr_shm_rkey_t);
}

static madrail_status_t mdr_shm_addr_pack(mdr_rail_t *rail, void *buf, size_t len)
{
    mdr_shm_addr_t a;

    if (rail == NULL || buf == NULL || len < sizeof(a))
        return MADRAIL_ERR_INVALID;
    memset(&a, 0, sizeof(a));
    a.mark = MDR_SHM_ADDR_MARK;
    a.version = MDR_SHM_VERSION;
    a.flags = rail->cma ? MDR_SHM_AF_CMA : 0;
    a.pid = (int32_t)rail->pid;
    a.start = rail->start;
    a.node = rail->node;
    a.tag = rail->tag;
    a.pidns = rail->pidns;
    memcpy(buf, &a, sizeof(a));
    return MADRAIL_OK;
}

/* ---------------- liveness ---------------- */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Start watching ep's peer process; -1 if it is already gone. */
int mdr_shm_watch_peer(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;
    struct epoll_event ev;
    int fd;

    ep->pidfd = -1;
    ep->self = ep->pid == rail->pid && ep->start == rail->start;
    if (ep->self)
        return 0;
    fd = (int)syscall(SYS_pidfd_open, (pid_t)ep->pid, 0);
    if (fd < 0 && errno == ESRCH)
        return -1;
    /* checked after the pidfd exists: it then names the right process */
    if (!mdr_shm_pid_alive(ep->pid, ep->start)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (fd >= 0) {
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN;
        ev.data.ptr = ep;
        if (epoll_ctl(rail->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            fd = -1;
        }
    }
    ep->pidfd = fd; /* -1: kill(pid, 0) and /proc at each check */
    return 0;
}

void mdr_shm_unwatch_peer(mdr_ep_t *ep)
{
    if (ep->pidfd >= 0) {
        epoll_ctl(ep->rail->epfd, EPOLL_CTL_DEL, ep->pidfd, NULL);
        close(ep->pidfd);
        ep->pidfd = -1;
    }
}

/* Snapshot of the live endpoints into rail->scan (upcalls may destroy or
 * create endpoints while the caller walks it); returns the count. */
static size_t mdr_shm_snapshot(mdr_rail_t *rail)
{
    mdr_list_t *l;
    size_t n = 0;

    if (rail->neps > rail->scan_cap) {
        size_t cap = rail->neps * 2;
        mdr_ep_t **s = realloc(rail->scan, cap * sizeof(*s));
        if (s != NULL) {
            rail->scan = s;
            rail->scan_cap = cap;
        }
    }
    mdr_list_for_each(l, &rail->base.eps_all) {
        if (n == rail->scan_cap)
            break;
        rail->scan[n++] = mdr_container_of(l, mdr_ep_t, base.link);
    }
    return n;
}

static void mdr_shm_peer_died(mdr_ep_t *ep)
{
    mdr_rail_t *rail = ep->rail;

    if (ep->failed || ep->base.destroyed)
        return;
    /* what it wrote before dying is delivered first */
    mdr_shm_ep_progress(ep);
    if (ep->failed || ep->base.destroyed)
        return;
    if (ep->pseg != NULL && ep->pseg->hdr->pid == ep->pid && ep->pseg->hdr->start == ep->start &&
        shm_unlink(ep->pseg->name) == 0)
        mdr_debug("rail %s: removed %s%s of the dead process %d", rail->log_name, MDR_SHM_DIR,
                  ep->pseg->name, (int)ep->pid);
    mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "peer process %d exited", (int)ep->pid);
}

static void mdr_shm_check(mdr_rail_t *rail)
{
    struct epoll_event evs[32];
    size_t ns, j;
    uint32_t i;
    int n, k;

    /* peers with a pidfd */
    do {
        n = epoll_wait(rail->epfd, evs, 32, 0);
        for (k = 0; k < n; k++) {
            mdr_ep_t *ep = evs[k].data.ptr;
            mdr_shm_unwatch_peer(ep); /* also stops the event */
            ep->pidfd = -2;           /* dead: no kill() check below */
            mdr_shm_peer_died(ep);
        }
    } while (n == 32);
    /* the others (a snapshot: upcalls may destroy endpoints) */
    ns = mdr_shm_snapshot(rail);
    for (j = 0; j < ns; j++) {
        mdr_ep_t *ep = rail->scan[j];
        if (!ep->base.destroyed && !ep->self && ep->pidfd == -1 && !ep->failed &&
            !mdr_shm_pid_alive(ep->pid, ep->start))
            mdr_shm_peer_died(ep);
    }
    /* rings of our segment that nobody will release otherwise */
    for (i = 0; i < rail->nrings; i++) {
        mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);
        uint64_t w = atomic_load_explicit(&c->state, memory_order_acquire);
        if (rail->rx_state[i] == MDR_SHM_RX_ZOMBIE) {
            if (MDR_SHM_STATE(w) != MDR_SHM_RING_OPEN ||
                (atomic_load_explicit(&c->prod_flags, memory_order_acquire) & MDR_SHM_F_CLOSED) ||
                !mdr_shm_pid_alive(c->prod_pid, c->prod_start))
                mdr_shm_ring_release(rail, i);
        } else if (rail->rx_state[i] == MDR_SHM_RX_UNKNOWN &&
                   MDR_SHM_STATE(w) == MDR_SHM_RING_CLAIMING &&
                   kill(MDR_SHM_STATE_PID(w), 0) != 0 && errno == ESRCH) {
            /* claimed by a process that died before publishing the claim */
            if (atomic_compare_exchange_strong(&c->state, &w,
                                               MDR_SHM_MKSTATE(MDR_SHM_RING_FREE, 0)))
                mdr_debug("rail %s: ring %u: claim of dead process %d taken back",
                          rail->log_name, i, (int)MDR_SHM_STATE_PID(w));
        }
    }
}

/* ---------------- discovery ---------------- */

/* Refuse ring i (the producer sees the flag and fails its endpoint). */
static void mdr_shm_ring_refuse(mdr_rail_t *rail, uint32_t i, const char *why)
{
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);

    snprintf(c->cons_reason, sizeof(c->cons_reason), "%s", why);
    c->cons_status = MADRAIL_ERR_RAIL_DOWN;
    atomic_fetch_or_explicit(&c->cons_flags, MDR_SHM_F_REFUSED | MDR_SHM_F_CLOSED,
                             memory_order_release);
    rail->rx_state[i] = MDR_SHM_RX_ZOMBIE;
    rail->nzombies++;
}

/* Close ring i as if we had gone, without a word: the claim did not carry
 * the job key. */
static void mdr_shm_ring_close_silently(mdr_rail_t *rail, uint32_t i)
{
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);

    atomic_fetch_or_explicit(&c->cons_flags, MDR_SHM_F_CLOSED, memory_order_release);
    rail->rx_state[i] = MDR_SHM_RX_ZOMBIE;
    rail->nzombies++;
}

static void mdr_shm_ring_new(mdr_rail_t *rail, uint32_t i)
{
    mdr_shm_ring_ctl_t *c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);
    char seg[MDR_SHM_NAME_MAX];
    uint64_t uuid = c->prod_uuid, tag = c->prod_tag;
    mdr_shm_pseg_t *ps = NULL;
    const char *why = NULL;
    mdr_ep_t *ep;
    mdr_rail_offer_t offer;

    if (atomic_load_explicit(&c->prod_flags, memory_order_acquire) & MDR_SHM_F_CLOSED) {
        mdr_shm_ring_release(rail, i); /* given up before we saw it */
        return;
    }
    if (!mdr_drv_key_equal(rail->job_key, c->prod_key)) {
        char src[32];
        snprintf(src, sizeof(src), "pid %d", (int)c->prod_pid);
        memset(c->prod_key, 0, sizeof(c->prod_key));
        mdr_drv_refusal(&rail->refusals, rail->log_name, src,
                        "ring %u claimed without this job's key", i);
        mdr_shm_ring_close_silently(rail, i);
        return;
    }
    memset(c->prod_key, 0, sizeof(c->prod_key));
    memcpy(seg, c->prod_seg, sizeof(seg));
    if (uuid == 0 || uuid == rail->uuid || c->prod_pid <= 0 ||
        memchr(seg, '\0', sizeof(seg)) == NULL) {
        mdr_warn("rail %s: ring %u claimed with a bad identity (uuid %016llx, pid %d); "
                 "refusing it",
                 rail->log_name, i, (unsigned long long)uuid, (int)c->prod_pid);
        mdr_shm_ring_refuse(rail, i, "bad identity");
        return;
    }
    ep = mdr_shm_ep_lookup(rail, uuid);
    if (ep != NULL && ep->has_rx) {
        /* the peer started over (its old endpoint is gone): report the old
         * connection's end before offering the new one */
        mdr_shm_ep_fail(ep, MADRAIL_ERR_RAIL_DOWN, "the peer reconnected");
        mdr_shm_report(rail);
        ep = mdr_shm_ep_lookup(rail, uuid);
        if (ep != NULL && ep->has_rx)
            ep = NULL; /* cannot be: a failed ep leaves the table */
    }
    if (ep != NULL) {
        if (ep->pseg == NULL || ep->pseg->tag != tag) {
            mdr_warn("rail %s peer %016llx: ring %u comes from another segment than the "
                     "peer's address names; refusing it",
                     rail->log_name, (unsigned long long)uuid, i);
            mdr_shm_ring_refuse(rail, i, "not from the addressed segment");
            return;
        }
        mdr_debug("rail %s peer %016llx: its ring %u joins our endpoint", rail->log_name,
                  (unsigned long long)uuid, i);
        mdr_shm_ep_attach_rx(ep, i);
        return;
    }

    if (mdr_shm_pseg_get(rail, seg, tag, uuid, &ps, &why) != MADRAIL_OK) {
        mdr_debug("rail %s peer %016llx: refusing ring %u: %s", rail->log_name,
                  (unsigned long long)uuid, i, why);
        mdr_shm_ring_refuse(rail, i, why);
        return;
    }
    if (mdr_shm_ep_alloc(rail, uuid, NULL, &ep) != MADRAIL_OK) {
        mdr_shm_pseg_put(rail, ps);
        mdr_error("rail %s: out of memory accepting peer %016llx", rail->log_name,
                  (unsigned long long)uuid);
        mdr_shm_ring_refuse(rail, i, "out of memory");
        return;
    }
    ep->pseg = ps;
    ep->pid = c->prod_pid;
    ep->start = c->prod_start;
    ep->cma = rail->cma;
    if (mdr_shm_watch_peer(ep) != 0) {
        mdr_shm_ring_refuse(rail, i, "peer process gone");
        mdr_shm_ep_free(ep);
        return;
    }
    mdr_shm_ep_attach_rx(ep, i);
    ep->accepting = 1;
    offer = mdr_rail_ep_offer(&ep->base, ep);
    ep->accepting = 0;
    if (offer == MDR_RAIL_OFFER_GONE) /* the core destroyed it inside the upcall */
        return;
    if (offer == MDR_RAIL_OFFER_REFUSED) {
        mdr_debug("rail %s peer %016llx: refused by the core", rail->log_name,
                  (unsigned long long)uuid);
        c->cons_status = MADRAIL_ERR_RAIL_DOWN;
        snprintf(c->cons_reason, sizeof(c->cons_reason), "refused by the peer");
        atomic_fetch_or_explicit(&c->cons_flags, MDR_SHM_F_REFUSED, memory_order_release);
        mdr_shm_ep_destroy(ep);
        return;
    }
    mdr_debug("rail %s peer %016llx: accepted (pid %d, ring %u)", rail->log_name,
              (unsigned long long)uuid, (int)ep->pid, i);
}

static int mdr_shm_discover(mdr_rail_t *rail)
{
    uint32_t i;
    int n = 0;

    for (i = 0; i < rail->nrings; i++) {
        mdr_shm_ring_ctl_t *c;
        if (rail->rx_state[i] != MDR_SHM_RX_UNKNOWN)
            continue;
        c = mdr_shm_ring_ctl(rail->seg_base, &rail->lay, i);
        if (MDR_SHM_STATE(atomic_load_explicit(&c->state, memory_order_acquire)) !=
            MDR_SHM_RING_OPEN)
            continue;
        mdr_shm_ring_new(rail, i);
        n++;
    }
    return n;
}

/* ---------------- progress ---------------- */

static int mdr_shm_progress(mdr_rail_t *rail)
{
    uint32_t claims;
    size_t n, k;
    int count = 0;
    double now;

    if (rail == NULL || rail->base.in_progress)
        return 0;
    rail->base.in_progress = 1;

    claims = atomic_load_explicit(&rail->hdr->claims, memory_order_acquire);
    if (claims != rail->seen_claims) {
        rail->seen_claims = claims;
        count += mdr_shm_discover(rail);
    }

    n = mdr_shm_snapshot(rail);
    for (k = 0; k < n; k++)
        if (!rail->scan[k]->base.destroyed)
            count += mdr_shm_ep_progress(rail->scan[k]);

    if (rail->neps > 0 || rail->nzombies > 0) {
        now = mdr_time_sec();
        if (now >= rail->next_check) {
            rail->next_check = now + rail->cfg.peer_check;
            mdr_shm_check(rail);
        }
    }
    count += mdr_shm_report(rail);
    mdr_shm_reap(rail);
    rail->base.in_progress = 0;
    return count;
}

const mdr_rail_ops_t mdr_shm_ops = {
    .size = MDR_RAIL_OPS_SIZE,
    .caps = MDR_RAIL_CAP_PUT | MDR_RAIL_CAP_REG_CHEAP | MDR_RAIL_CAP_CMA,
    .name = "shm",
    .open = mdr_shm_open,
    .close = mdr_shm_close,
    .query = mdr_shm_query,
    .addr_pack = mdr_shm_addr_pack,
    .ep_create = mdr_shm_ep_create,
    .ep_destroy = mdr_shm_ep_destroy,
    .ep_backlog = mdr_shm_ep_backlog,
    .ep_unsent = mdr_shm_ep_unsent,
    .ep_idle = mdr_shm_ep_idle,
    .ep_link_quiet = mdr_rail_unknown_link_quiet,
    .ep_fence = mdr_rail_noop_fence,
    .ep_link_rto = mdr_rail_unknown_link_rto,
    .ctrl_send = mdr_shm_ctrl_send,
    .mem_reg = mdr_shm_mem_reg,
    .mem_dereg = mdr_shm_mem_dereg,
    .rkey_pack = mdr_shm_rkey_pack,
    .put = mdr_shm_put,
    .progress = mdr_shm_progress,
    .flush = mdr_rail_noop_flush,
};
