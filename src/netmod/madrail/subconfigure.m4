[#] start of __file__
dnl The madrail ch4 netmod: MPIDIG active messages carried by libmadrail
dnl (multi-rail).  Configure with --with-device=ch4:madrail and
dnl --with-madrail=PREFIX (or --with-madrail-include= / --with-madrail-lib=).
dnl MPICH_SUBCFG_AFTER=src/mpid/ch4

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_COND_IF([BUILD_CH4],[
        for net in $ch4_netmods ; do
            if test "$net" = "madrail" ; then
                build_ch4_netmod_madrail=yes
                AC_DEFINE(HAVE_CH4_NETMOD_MADRAIL,1,[madrail netmod is built])
                if test "$build_ch4_locality_info" != "yes" ; then
                    AC_DEFINE(MPIDI_BUILD_CH4_LOCALITY_INFO, 1, [CH4 should build locality info])
                    build_ch4_locality_info="yes"
                fi
            fi
        done
    ])
    AM_CONDITIONAL([BUILD_CH4_NETMOD_MADRAIL],[test "X$build_ch4_netmod_madrail" = "Xyes"])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH4_NETMOD_MADRAIL],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch4:madrail])

    dnl madrail_am_send: the netmod needs a libmadrail with active messages.
    PAC_CHECK_HEADER_LIB_FATAL(madrail, madrail.h, madrail, madrail_am_send)

    AC_MSG_CHECKING([if madrail.h has the active-message API version 0.1 or later])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([#include <madrail.h>], [
        #if MADRAIL_VERSION_MAJOR == 0 && MADRAIL_VERSION_MINOR < 1
        #error too old
        #endif
        madrail_am_handler_t h = 0;
        (void) h;
        return 0;])],[madrail_happy=yes],[madrail_happy=no])
    AC_MSG_RESULT([$madrail_happy])
    if test "$madrail_happy" = "no" ; then
        AC_MSG_ERROR([madrail.h is too old for the madrail netmod (needs the active-message API)])
    fi

])dnl end AM_COND_IF(BUILD_CH4_NETMOD_MADRAIL,...)
])dnl end _BODY

[#] end of __file__
