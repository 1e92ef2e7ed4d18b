dnl with_ucx.m4 -- --with-ucx[=DIR].
dnl
dnl UCX (ucp) for the ucx rail driver (src/rails/ucx/).  When found,
dnl HAVE_UCX is defined, AM_CONDITIONAL HAVE_UCX adds the driver's sources,
dnl and UCX_CPPFLAGS/UCX_LDFLAGS/UCX_LIBS are substituted for the library
dnl alone (Makefile.am), not added to the global flags.  Not found: the
dnl library builds without the driver and a "ucx:..." rail is refused as
dnl an unknown driver.  UCX's pkg-config module is "ucx"; without it we
dnl look for ucp directly (it pulls in uct and ucs).
AC_DEFUN([MDR_WITH_UCX], [
MDR_CHECK_PKG([UCX], [ucx], [ucx], [ucp/api/ucp.h], [ucp],
              [ucp_init_version], [UCX])
AS_IF([test "$mdr_have_UCX" = yes], [
    AC_DEFINE([HAVE_UCX], [1], [Define to 1 if UCX was found (the ucx driver is built).])
])
AM_CONDITIONAL([HAVE_UCX], [test "$mdr_have_UCX" = yes])
])
