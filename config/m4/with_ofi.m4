dnl with_ofi.m4 -- --with-libfabric[=DIR].
dnl
dnl When libfabric is found, HAVE_LIBFABRIC is defined and the ofi driver
dnl (src/rails/ofi/) is built with OFI_CPPFLAGS (AM_CONDITIONAL
dnl HAVE_LIBFABRIC guards its sources in Makefile.am).  The library is
dnl not linked: the first ofi rail dlopen()s it (src/rails/ofi/ofi_dl.h);
dnl OFI_LDFLAGS (its -L and -rpath) still go on the link, so that dlopen
dnl finds the libfabric configure found.
AC_DEFUN([MDR_WITH_OFI], [
MDR_CHECK_PKG([OFI], [libfabric], [libfabric], [rdma/fabric.h], [fabric],
              [fi_getinfo], [libfabric])
AS_IF([test "$mdr_have_OFI" = yes], [
    AC_DEFINE([HAVE_LIBFABRIC], [1], [Define to 1 if libfabric was found.])
])
AM_CONDITIONAL([HAVE_LIBFABRIC], [test "$mdr_have_OFI" = yes])
])
