! mpi_fort: a Fortran MPI program through all three Fortran bindings:
! the main program uses mpi_f08 (Fortran 2008), one subroutine `use mpi`
! (Fortran 90), one includes mpif.h (Fortran 77).  Point-to-point (a ring,
! and one large message striped over the rails), collectives (allreduce,
! bcast, reduce) and derived datatypes (a strided vector, a struct).
!
! Built by run_mpi_tests.sh with our mpifort and with Debian's
! mpifort.mpich, and run on our MPICH either way: a Debian-built binary
! links libmpichfort.so.12 and libmpich.so.12, which must resolve to ours.
! Prints " No Errors" on success (rank 0), "FAIL - ..." lines otherwise.

module mpit_fort_checks
    implicit none
    integer :: fails = 0
    integer :: myrank = -1
contains
    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        if (ok) then
            write (*, '(a,i0,a,a)') 'ok - [r', myrank, '] mpi_fort: ', what
        else
            fails = fails + 1
            write (*, '(a,i0,a,a)') 'FAIL - [r', myrank, '] mpi_fort: ', what
        end if
    end subroutine check
end module mpit_fort_checks

! Fortran 90 binding: a broadcast and a ring exchange with MPI_Sendrecv
subroutine f90_part(rank, nprocs)
    use mpi
    use mpit_fort_checks
    implicit none
    integer, intent(in) :: rank, nprocs
    integer :: ierr, i, nxt, prv
    integer :: vals(64), got(64)
    integer :: status(MPI_STATUS_SIZE)
    double precision :: b(100)

    b = 0d0
    if (rank == 0) b = 2.5d0
    call MPI_Bcast(b, 100, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    call check(ierr == MPI_SUCCESS .and. all(b == 2.5d0), 'use mpi: MPI_Bcast of 100 reals')

    nxt = mod(rank + 1, nprocs)
    prv = mod(rank + nprocs - 1, nprocs)
    do i = 1, 64
        vals(i) = rank * 100 + i
    end do
    got = -1
    call MPI_Sendrecv(vals, 64, MPI_INTEGER, nxt, 11, got, 64, MPI_INTEGER, prv, 11, &
                      MPI_COMM_WORLD, status, ierr)
    call check(ierr == MPI_SUCCESS .and. got(1) == prv * 100 + 1 .and. got(64) == prv * 100 + 64, &
               'use mpi: ring of 64 integers (MPI_Sendrecv)')
end subroutine f90_part

! Fortran 77 binding: a reduction to rank 0
subroutine f77_part(rank, nprocs)
    use mpit_fort_checks, only: check
    implicit none
    include 'mpif.h'
    integer rank, nprocs, ierr, mine, total
    mine = rank + 1
    total = -1
    call MPI_Reduce(mine, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
        call check(ierr == MPI_SUCCESS .and. total == nprocs * (nprocs + 1) / 2, &
                   'mpif.h: MPI_Reduce sum of ranks')
    end if
end subroutine f77_part

program mpi_fort
    use mpi_f08
    use mpit_fort_checks
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    integer, parameter :: nbig = 2 * 1024 * 1024   ! doubles: 16 MiB
    integer, parameter :: n = 200
    type(MPI_Datatype) :: column, pair_t
    type(MPI_Status) :: st
    integer :: nprocs, i, j, nxt, prv, total, bad
    double precision, allocatable :: big(:)
    double precision :: a(n, n), r(n, n)
    double precision :: dsum

    type, bind(c) :: pair
        integer(c_int) :: id
        real(c_double) :: val
    end type pair
    type(pair) :: ps(50), pr(50)
    integer :: blens(2)
    integer(kind=MPI_ADDRESS_KIND) :: displs(2), base
    type(MPI_Datatype) :: types(2)

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, myrank)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
    nxt = mod(myrank + 1, nprocs)
    prv = mod(myrank + nprocs - 1, nprocs)

    ! point-to-point: a large message from rank 0 to rank 1
    allocate (big(nbig))
    if (myrank == 0) then
        do i = 1, nbig
            big(i) = dble(i) * 0.25d0
        end do
        call MPI_Send(big, nbig, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD)
    else if (myrank == 1) then
        big = 0d0
        call MPI_Recv(big, nbig, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, st)
        bad = 0
        do i = 1, nbig
            if (big(i) /= dble(i) * 0.25d0) bad = bad + 1
        end do
        call check(bad == 0 .and. st%MPI_SOURCE == 0, 'mpi_f08: 16 MiB message from rank 0 intact')
    end if
    deallocate (big)

    ! collective
    call MPI_Allreduce(myrank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call check(total == nprocs * (nprocs + 1) / 2, 'mpi_f08: MPI_Allreduce sum of ranks')
    dsum = 0d0
    call MPI_Allreduce(dble(myrank) + 0.5d0, dsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
    call check(abs(dsum - (dble(nprocs) * (nprocs - 1) / 2 + 0.5d0 * nprocs)) < 1d-12, &
               'mpi_f08: MPI_Allreduce of reals')

    ! derived datatype: a row of a column-major matrix (stride n)
    do j = 1, n
        do i = 1, n
            a(i, j) = myrank * 1d6 + i * 1000 + j
        end do
    end do
    r = -1d0
    call MPI_Type_vector(n, 1, n, MPI_DOUBLE_PRECISION, column)
    call MPI_Type_commit(column)
    call MPI_Sendrecv(a(3, 1), 1, column, nxt, 2, r(7, 1), 1, column, prv, 2, MPI_COMM_WORLD, st)
    bad = 0
    do j = 1, n
        if (r(7, j) /= prv * 1d6 + 3 * 1000 + j) bad = bad + 1
        if (r(6, j) /= -1d0) bad = bad + 1
    end do
    call check(bad == 0, 'mpi_f08: a matrix row (MPI_Type_vector, stride 200) around the ring')
    call MPI_Type_free(column)

    ! derived datatype: a struct
    call MPI_Get_address(ps(1)%id, displs(1))
    call MPI_Get_address(ps(1)%val, displs(2))
    base = displs(1)
    displs = displs - base
    blens = 1
    types(1) = MPI_INTEGER
    types(2) = MPI_DOUBLE_PRECISION
    call MPI_Type_create_struct(2, blens, displs, types, pair_t)
    call MPI_Type_commit(pair_t)
    do i = 1, 50
        ps(i)%id = myrank * 1000 + i
        ps(i)%val = myrank + i / 4d0
        pr(i)%id = -1
        pr(i)%val = -1d0
    end do
    call MPI_Sendrecv(ps, 50, pair_t, nxt, 3, pr, 50, pair_t, prv, 3, MPI_COMM_WORLD, st)
    bad = 0
    do i = 1, 50
        if (pr(i)%id /= prv * 1000 + i .or. pr(i)%val /= prv + i / 4d0) bad = bad + 1
    end do
    call check(bad == 0, 'mpi_f08: 50 structs (MPI_Type_create_struct) around the ring')
    call MPI_Type_free(pair_t)

    call f90_part(myrank, nprocs)
    call f77_part(myrank, nprocs)

    call MPI_Allreduce(fails, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (myrank == 0) then
        if (total == 0) then
            write (*, '(a)') ' No Errors'
        else
            write (*, '(a,i0,a)') ' Found ', total, ' errors'
        end if
    end if
    call MPI_Finalize()
    if (total /= 0) stop 1
end program mpi_fort
