dnl with_ucx.m4 -- --with-ucx[=DIR].
dnl
dnl Detected and reported only: the ucx driver is not written yet, so
dnl nothing links UCX.  UCX_CPPFLAGS/UCX_LDFLAGS/UCX_LIBS are substituted
dnl for the driver to use once it exists (AM_CONDITIONAL HAVE_UCX guards
dnl its sources).  UCX's pkg-config module is "ucx"; without it we look
dnl for ucp directly (it pulls in uct and ucs).
AC_DEFUN([MDR_WITH_UCX], [
MDR_CHECK_PKG([UCX], [ucx], [ucx], [ucp/api/ucp.h], [ucp],
              [ucp_init_version], [UCX])
AS_IF([test "$mdr_have_UCX" = yes], [
    AC_DEFINE([HAVE_UCX], [1], [Define to 1 if UCX was found.])
])
AM_CONDITIONAL([HAVE_UCX], [test "$mdr_have_UCX" = yes])
])
