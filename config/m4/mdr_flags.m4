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

dnl MDR_LIB_OPTIMIZE: how the library's own objects are optimised.
dnl --enable-lto (default: when the compiler can) compiles them with
dnl link-time optimisation and links libmadrail.so with it, so that the
dnl per-message path, split over core, rail and driver files, is inlined
dnl across files (measured: 8-byte latency over ucx:shm 1.03 -> 0.91 us).
dnl The objects are fat (-ffat-lto-objects): the tests link the same
dnl objects through libmadrail_internal.la without LTO, as plain code.
dnl -fno-semantic-interposition lets the compiler inline and specialise
dnl calls between the library's own global functions: the version script
dnl exports only the public API, so none of them can be interposed.
dnl Sanitizer and fuzz builds keep plain objects (their checks want every
dnl call as written).  Sets MDR_LIB_CFLAGS and MDR_LIB_LDFLAGS, and
dnl MDR_NOLTO_LDFLAGS for the programs that link those objects directly
dnl (the tests: an LTO link of each would cost seconds apiece).
AC_DEFUN([MDR_LIB_OPTIMIZE], [
AC_ARG_ENABLE([lto],
    [AS_HELP_STRING([--disable-lto],
        [do not build libmadrail.so with link-time optimisation (default: on when
         $CC supports -flto=auto -ffat-lto-objects; off with sanitizers or fuzzing)])],
    [], [enable_lto=auto])
MDR_LIB_CFLAGS=""
MDR_LIB_LDFLAGS=""
MDR_NOLTO_LDFLAGS=""
MDR_CC_FLAG([-fno-semantic-interposition],
            [MDR_LIB_CFLAGS="-fno-semantic-interposition"])
mdr_lto_how="no (--disable-lto)"
AS_IF([test "$enable_sanitizers" = yes || test "$enable_fuzz" = yes], [
    AS_IF([test "$enable_lto" = yes],
        [AC_MSG_ERROR([--enable-lto cannot be combined with --enable-sanitizers or --enable-fuzz])])
    mdr_lto_how="no (sanitizer or fuzz build)"
], [test "$enable_lto" != no], [
    AC_CACHE_CHECK([whether $CC links with -flto=auto -ffat-lto-objects], [mdr_cv_lto], [
        mdr_save_CFLAGS=$CFLAGS
        mdr_save_LDFLAGS=$LDFLAGS
        CFLAGS="$CFLAGS -Werror -flto=auto -ffat-lto-objects"
        LDFLAGS="$LDFLAGS -flto=auto"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [mdr_cv_lto=yes], [mdr_cv_lto=no])
        CFLAGS=$mdr_save_CFLAGS
        LDFLAGS=$mdr_save_LDFLAGS])
    AS_IF([test "$mdr_cv_lto" = yes], [
        MDR_LIB_CFLAGS="$MDR_LIB_CFLAGS -flto=auto -ffat-lto-objects"
        MDR_LIB_LDFLAGS="-flto=auto"
        MDR_NOLTO_LDFLAGS="-Wc,-fno-lto"
        mdr_lto_how="yes"
    ], [test "$enable_lto" = yes], [
        AC_MSG_ERROR([--enable-lto: $CC cannot link with -flto=auto -ffat-lto-objects])
    ], [mdr_lto_how="no ($CC cannot)"])
])
AC_SUBST([MDR_LIB_CFLAGS])
AC_SUBST([MDR_LIB_LDFLAGS])
AC_SUBST([MDR_NOLTO_LDFLAGS])
])
