/*
 * The driver interface's own checks (rails/rail.c): a driver whose ops
 * table was built for another mdr_rail_ops_t (its size field differs), or
 * whose capability bits disagree with the operations it wires in, is
 * refused when the registry hands drivers out.  Each built driver must
 * pass; altered copies of a real driver's table must not.
 */
#include "mdr_config.h"

#include <string.h>

#include "rails/rail.h"
#include "unit_check.h"

static int nvisited, nvisited_ok;

static void visit(const mdr_rail_ops_t *ops, void *arg)
{
    (void)arg;
    nvisited++;
    if (mdr_rail_ops_check(ops) == MADRAIL_OK && mdr_rail_find(ops->name) == ops)
        nvisited_ok++;
    check(ops->size == sizeof(mdr_rail_ops_t), "driver %s: size %zu == %zu", ops->name,
          ops->size, sizeof(mdr_rail_ops_t));
    check((ops->caps & MDR_RAIL_CAP_PUT) != 0, "driver %s: advertises put", ops->name);
}

static void refused(const mdr_rail_ops_t *o, const char *what)
{
    check(mdr_rail_ops_check(o) == MADRAIL_ERR_INVALID, "refused: %s", what);
}

int main(void)
{
    mdr_rail_ops_t o;
    int n;

    n = mdr_rail_foreach(visit, NULL);
    check(n >= 2 && n == nvisited && nvisited_ok == n,
          "every built driver passes the check and is found by name (%d of %d)", nvisited_ok,
          n);
    check(mdr_rail_ops_check(&mdr_tcp_ops) == MADRAIL_OK, "tcp accepted");
    check(mdr_rail_ops_check(&mdr_loop_ops) == MADRAIL_OK, "loop accepted");
    check((mdr_tcp_ops.caps & MDR_RAIL_CAP_FLUSH) && !(mdr_loop_ops.caps & MDR_RAIL_CAP_FLUSH),
          "tcp coalesces (FLUSH), loop does not");

    o = mdr_tcp_ops;
    o.size = sizeof(o) - sizeof(void *);
    refused(&o, "size of an older, shorter ops table");
    o.size = sizeof(o) + sizeof(void *);
    refused(&o, "size of a newer, longer ops table");
    o.size = 0;
    refused(&o, "size left 0 (a table that predates the field)");

    o = mdr_tcp_ops;
    o.ep_unsent = NULL;
    refused(&o, "a NULL operation");
    o = mdr_tcp_ops;
    o.name = NULL;
    refused(&o, "no name");
    o = mdr_tcp_ops;
    o.caps |= 1u << 20;
    refused(&o, "an unknown capability bit");

    o = mdr_tcp_ops;
    o.put = mdr_rail_unsup_put;
    refused(&o, "PUT advertised, put is the stub");
    o = mdr_tcp_ops;
    o.rkey_pack = mdr_rail_unsup_rkey_pack;
    refused(&o, "PUT advertised, rkey_pack is the stub");
    o = mdr_tcp_ops;
    o.caps &= ~(uint32_t)MDR_RAIL_CAP_PUT;
    refused(&o, "put wired in, PUT not advertised");

    o = mdr_tcp_ops;
    o.put = mdr_rail_unsup_put;
    o.mem_reg = mdr_rail_unsup_mem_reg;
    o.mem_dereg = mdr_rail_unsup_mem_dereg;
    o.rkey_pack = mdr_rail_unsup_rkey_pack;
    o.caps = MDR_RAIL_CAP_FLUSH;
    check(mdr_rail_ops_check(&o) == MADRAIL_OK, "a driver without puts, none advertised: accepted");
    o.caps = MDR_RAIL_CAP_FLUSH | MDR_RAIL_CAP_PUT_HW;
    refused(&o, "PUT_HW without put");
    o.caps = MDR_RAIL_CAP_FLUSH | MDR_RAIL_CAP_CMA;
    refused(&o, "CMA without put");

    o = mdr_loop_ops;
    o.caps |= MDR_RAIL_CAP_FLUSH;
    refused(&o, "FLUSH advertised, flush is the no-op");
    o = mdr_tcp_ops;
    o.caps &= ~(uint32_t)MDR_RAIL_CAP_FLUSH;
    refused(&o, "flush wired in, FLUSH not advertised");

    check(mdr_rail_find("no-such-driver") == NULL, "unknown driver name: not found");

    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
