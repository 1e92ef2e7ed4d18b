dnl with_hwloc.m4 -- --with-hwloc[=DIR].
dnl
dnl hwloc finds the NICs near the process's cores for the default rail
dnl list.  It is the one optional dependency linked today: when found,
dnl HAVE_HWLOC is defined and its flags are added to the global flags, so
dnl the library and every program link it.
AC_DEFUN([MDR_WITH_HWLOC], [
MDR_CHECK_PKG([HWLOC], [hwloc], [hwloc], [hwloc.h], [hwloc],
              [hwloc_topology_init], [hwloc])
AS_IF([test "$mdr_have_HWLOC" = yes], [
    AC_DEFINE([HAVE_HWLOC], [1], [Define to 1 if hwloc is available and linked.])
    CPPFLAGS="$CPPFLAGS $HWLOC_CPPFLAGS"
    LDFLAGS="$LDFLAGS $HWLOC_LDFLAGS"
    LIBS="$HWLOC_LIBS $LIBS"
])
AM_CONDITIONAL([HAVE_HWLOC], [test "$mdr_have_HWLOC" = yes])
])
