dnl mdr_flags.m4 -- compiler and linker options of madrail.
dnl
dnl Warnings and -Werror go into MDR_CFLAGS (used as AM_CFLAGS), never into
dnl CFLAGS, so that configure's own test programs are not failed by them
dnl and a user's CFLAGS=... stays theirs.  Sanitizers, in contrast, must
dnl reach every compile and link (libtool, tests, the benchmarks), so they
dnl go into CFLAGS and LDFLAGS, after being proven to work.

dnl MDR_CC_FLAG(FLAG, ACTION-IF-OK, ACTION-IF-NOT)
AC_DEFUN([MDR_CC_FLAG], [
    AS_VAR_PUSHDEF([mdr_cv], [mdr_cv_cflag_$1])
    AC_CACHE_CHECK([whether $CC accepts $1], [mdr_cv], [
        mdr_save_CFLAGS=$CFLAGS
        CFLAGS="$CFLAGS -Werror $1"
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
            [AS_VAR_SET([mdr_cv], [yes])], [AS_VAR_SET([mdr_cv], [no])])
        CFLAGS=$mdr_save_CFLAGS])
    AS_VAR_IF([mdr_cv], [yes], [$2], [$3])
    AS_VAR_POPDEF([mdr_cv])
])

AC_DEFUN([MDR_COMPILER_FLAGS], [
MDR_CFLAGS=""
MDR_CC_FLAG([-std=gnu11], [MDR_CFLAGS="$MDR_CFLAGS -std=gnu11"],
            [AC_MSG_ERROR([$CC does not accept -std=gnu11])])
for mdr_flag in -Wall -Wextra; do
    MDR_CC_FLAG([$mdr_flag], [MDR_CFLAGS="$MDR_CFLAGS $mdr_flag"])
done

AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])],
    [], [enable_werror=no])
AS_IF([test "$enable_werror" = yes], [MDR_CFLAGS="$MDR_CFLAGS -Werror"])
AC_SUBST([MDR_CFLAGS])

AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers],
        [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
AS_IF([test "$enable_sanitizers" = yes], [
    dnl -fno-sanitize-recover makes an undefined-behaviour report fatal, so
    dnl a test that triggers one fails instead of printing and passing.
    mdr_san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    AC_MSG_CHECKING([whether $CC can build and run with $mdr_san])
    mdr_save_CFLAGS=$CFLAGS
    mdr_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $mdr_san"
    LDFLAGS="$LDFLAGS $mdr_san"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [mdr_san_ok=yes], [mdr_san_ok=no])
    AC_MSG_RESULT([$mdr_san_ok])
    dnl configure.ac adds $mdr_san to CFLAGS and LDFLAGS after its checks.
    CFLAGS=$mdr_save_CFLAGS
    LDFLAGS=$mdr_save_LDFLAGS
    AS_IF([test "$mdr_san_ok" = no], [
        AC_MSG_ERROR([--enable-sanitizers: $CC cannot link with $mdr_san (is libasan installed?)])
    ])
])
])

dnl MDR_LD_VERSION_SCRIPT: does the linker take -Wl,--version-script?
dnl Sets MDR_VERSION_SCRIPT_LDFLAGS (with the path to src/libmadrail.map)
dnl and the automake conditional HAVE_LD_VERSION_SCRIPT.
AC_DEFUN([MDR_LD_VERSION_SCRIPT], [
AC_CACHE_CHECK([whether the linker accepts --version-script], [mdr_cv_ld_version_script], [
    cat > conftest.map <<_MDR_EOF
MDR_TEST_1.0 { global: mdr_conftest_*; local: *; };
_MDR_EOF
    mdr_save_LDFLAGS=$LDFLAGS
    LDFLAGS="$LDFLAGS -Wl,--version-script=conftest.map"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
        [mdr_cv_ld_version_script=yes], [mdr_cv_ld_version_script=no])
    LDFLAGS=$mdr_save_LDFLAGS
    rm -f conftest.map])
MDR_VERSION_SCRIPT_LDFLAGS=""
AS_IF([test "$mdr_cv_ld_version_script" = yes],
    [MDR_VERSION_SCRIPT_LDFLAGS='-Wl,--version-script=$(top_srcdir)/src/libmadrail.map'])
AC_SUBST([MDR_VERSION_SCRIPT_LDFLAGS])
AM_CONDITIONAL([HAVE_LD_VERSION_SCRIPT], [test "$mdr_cv_ld_version_script" = yes])
])
