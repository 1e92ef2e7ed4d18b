dnl mdr_check_pkg.m4 -- shared logic of --with-libfabric, --with-ucx and
dnl --with-hwloc.
dnl
dnl Every optional dependency follows the same rules, so they share one
dnl macro instead of three copies that drift apart:
dnl
dnl   --with-PKG        required: configure fails if it is not usable
dnl   --with-PKG=DIR    required, looked for in DIR/include and DIR/lib[64]
dnl   --without-PKG     not looked for at all
dnl   (nothing)         auto: pkg-config first, then plain header + library
dnl
dnl MDR_CHECK_PKG(VAR, OPTION, PKG-CONFIG-MODULE, HEADER, LIBRARY, FUNCTION,
dnl               HELP-NAME)
dnl
dnl On return mdr_have_VAR is "yes" or "no" and, when yes, VAR_CPPFLAGS,
dnl VAR_LDFLAGS and VAR_LIBS are set and AC_SUBSTed.  Nothing is added to
dnl the global CPPFLAGS/LDFLAGS/LIBS: the caller decides whether to link.
dnl mdr_how_VAR says how it was found (for the summary).

AC_DEFUN([MDR_CHECK_PKG], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([$2],
    [AS_HELP_STRING([--with-$2@<:@=DIR@:>@],
        [use $7 (installed under DIR); default: use it if found])],
    [mdr_with_$1=$withval], [mdr_with_$1=check])

mdr_have_$1=no
mdr_how_$1=""
$1_CPPFLAGS=""
$1_LDFLAGS=""
$1_LIBS=""

AS_CASE([$mdr_with_$1],
  [no], [mdr_how_$1="disabled by --without-$2"],
  [yes|check], [
    dnl pkg-config knows extra flags (e.g. -I.../ucx); try it first.
    PKG_CHECK_MODULES([MDR_PC_$1], [$3],
        [$1_CPPFLAGS="$MDR_PC_$1_CFLAGS"
         $1_LIBS="$MDR_PC_$1_LIBS"
         mdr_how_$1="pkg-config $3"],
        [$1_LIBS="-l$5"
         mdr_how_$1="system headers and library"])
  ],
  [
    dnl an installation directory
    AS_IF([test ! -d "$mdr_with_$1"],
        [AC_MSG_ERROR([--with-$2=$mdr_with_$1: no such directory])])
    dnl The compiler would also search the system paths: make sure the
    dnl header is really under DIR, or a system copy would be used silently.
    AS_IF([test ! -f "$mdr_with_$1/include/$4"],
        [AC_MSG_ERROR([--with-$2=$mdr_with_$1: $mdr_with_$1/include/$4 not found])])
    $1_CPPFLAGS="-I$mdr_with_$1/include"
    AS_IF([test -d "$mdr_with_$1/lib64"],
        [$1_LDFLAGS="-L$mdr_with_$1/lib64 -Wl,-rpath,$mdr_with_$1/lib64"],
        [$1_LDFLAGS="-L$mdr_with_$1/lib -Wl,-rpath,$mdr_with_$1/lib"])
    $1_LIBS="-l$5"
    mdr_how_$1="$mdr_with_$1"
  ])

AS_IF([test "$mdr_with_$1" != no], [
    dnl Whatever pkg-config said, prove that a program compiles and links.
    mdr_save_CPPFLAGS=$CPPFLAGS
    mdr_save_LDFLAGS=$LDFLAGS
    mdr_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $$1_CPPFLAGS"
    LDFLAGS="$LDFLAGS $$1_LDFLAGS"
    LIBS="$$1_LIBS $LIBS"
    AC_MSG_CHECKING([for $7 ($4, $6)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$4>]],
                                    [[void *volatile p = (void *)&$6; return p == 0;]])],
        [mdr_have_$1=yes], [mdr_have_$1=no])
    AC_MSG_RESULT([$mdr_have_$1])
    CPPFLAGS=$mdr_save_CPPFLAGS
    LDFLAGS=$mdr_save_LDFLAGS
    LIBS=$mdr_save_LIBS
    AS_IF([test "$mdr_have_$1" = no], [
        AS_IF([test "$mdr_with_$1" != check],
            [AC_MSG_ERROR([--with-$2 was given but $7 was not usable ($mdr_how_$1); see config.log])])
        mdr_how_$1="not found"
        $1_CPPFLAGS=""
        $1_LDFLAGS=""
        $1_LIBS=""
    ])
])
AC_SUBST([$1_CPPFLAGS])
AC_SUBST([$1_LDFLAGS])
AC_SUBST([$1_LIBS])
])
