dnl with_ofi.m4 -- --with-libfabric[=DIR].
dnl
dnl When libfabric is found, HAVE_LIBFABRIC is defined and the ofi driver
dnl (src/rails/ofi/) is built and linked with OFI_CPPFLAGS/OFI_LDFLAGS/
dnl OFI_LIBS (AM_CONDITIONAL HAVE_LIBFABRIC guards its sources in
dnl Makefile.am); only the library and what links it get -lfabric.
AC_DEFUN([MDR_WITH_OFI], [
MDR_CHECK_PKG([OFI], [libfabric], [libfabric], [rdma/fabric.h], [fabric],
              [fi_getinfo], [libfabric])
AS_IF([test "$mdr_have_OFI" = yes], [
    AC_DEFINE([HAVE_LIBFABRIC], [1], [Define to 1 if libfabric was found.])
])
AM_CONDITIONAL([HAVE_LIBFABRIC], [test "$mdr_have_OFI" = yes])
])
