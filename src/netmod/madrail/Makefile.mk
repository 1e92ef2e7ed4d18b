##
## The madrail ch4 netmod (--with-device=ch4:madrail).
##
## scripts/build-mpich.sh copies this directory to
## src/mpid/ch4/netmod/madrail/ of an MPICH 4.0.2 tree; mpich-patches/0001
## includes this file from src/mpid/ch4/netmod/Makefile.mk.  func_table.c and
## madrail_noinline.h are generated there by maint/gen_ch4_api.py (autogen.sh,
## mpich-patches/0002).
##

if BUILD_CH4_NETMOD_MADRAIL

noinst_HEADERS += src/mpid/ch4/netmod/madrail/madrail_pre.h \
                  src/mpid/ch4/netmod/madrail/madrail_types.h \
                  src/mpid/ch4/netmod/madrail/madrail_impl.h \
                  src/mpid/ch4/netmod/madrail/madrail_am.h \
                  src/mpid/ch4/netmod/madrail/madrail_p2p.h \
                  src/mpid/ch4/netmod/madrail/madrail_progress.h \
                  src/mpid/ch4/netmod/madrail/madrail_proc.h \
                  src/mpid/ch4/netmod/madrail/madrail_request.h \
                  src/mpid/ch4/netmod/madrail/madrail_pvars.h \
                  src/mpid/ch4/netmod/madrail/madrail_noinline.h \
                  src/mpid/ch4/netmod/madrail/netmod_inline.h

mpi_core_sources += src/mpid/ch4/netmod/madrail/func_table.c \
                    src/mpid/ch4/netmod/madrail/globals.c \
                    src/mpid/ch4/netmod/madrail/madrail_init.c \
                    src/mpid/ch4/netmod/madrail/madrail_am.c \
                    src/mpid/ch4/netmod/madrail/madrail_p2p.c \
                    src/mpid/ch4/netmod/madrail/madrail_comm.c \
                    src/mpid/ch4/netmod/madrail/madrail_win.c \
                    src/mpid/ch4/netmod/madrail/madrail_part.c \
                    src/mpid/ch4/netmod/madrail/madrail_spawn.c \
                    src/mpid/ch4/netmod/madrail/madrail_dtop.c \
                    src/mpid/ch4/netmod/madrail/madrail_pvars.c

errnames_txt_files += src/mpid/ch4/netmod/madrail/errnames.txt

endif
