dnl with_ofi.m4 -- --with-libfabric[=DIR].
dnl
dnl Detected and reported only: the ofi driver is not written yet, so
dnl nothing links libfabric.  OFI_CPPFLAGS/OFI_LDFLAGS/OFI_LIBS are
dnl substituted for the driver to use once it exists (AM_CONDITIONAL
dnl HAVE_LIBFABRIC guards its sources).
AC_DEFUN([MDR_WITH_OFI], [
MDR_CHECK_PKG([OFI], [libfabric], [libfabric], [rdma/fabric.h], [fabric],
              [fi_getinfo], [libfabric])
AS_IF([test "$mdr_have_OFI" = yes], [
    AC_DEFINE([HAVE_LIBFABRIC], [1], [Define to 1 if libfabric was found.])
])
AM_CONDITIONAL([HAVE_LIBFABRIC], [test "$mdr_have_OFI" = yes])
])
