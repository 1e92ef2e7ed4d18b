// mpi_cxx: a C++ MPI program as applications write them (C API from C++,
// std::vector buffers, a templated datatype helper), plus a few calls of
// MPICH's C++ bindings (MPI::, libmpichcxx) so that library is exercised
// too.  Point-to-point (a ring of small messages and one large message
// striped over the rails), collectives (allreduce, bcast, allgather) and
// derived datatypes (a struct type and a strided vector).
//
// Built by run_mpi_tests.sh with our mpicxx and with Debian's
// mpicxx.mpich, and run on our MPICH either way: a Debian-built binary
// links libmpich.so.12 and libmpichcxx.so.12, which must resolve to ours.
// Prints " No Errors" on success (rank 0), "FAIL - ..." lines otherwise.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

int rank = -1, size = 0;
long fails = 0;

void check(bool ok, const char *what)
{
    if (!ok) {
        ++fails;
        std::printf("FAIL - [r%d] mpi_cxx: %s\n", rank, what);
    } else {
        std::printf("ok - [r%d] mpi_cxx: %s\n", rank, what);
    }
}

struct particle {
    double pos[3];
    int id;
    char tag;
};

template <typename T> MPI_Datatype contiguous_type(int n);
template <> MPI_Datatype contiguous_type<double>(int n)
{
    MPI_Datatype t;
    MPI_Type_contiguous(n, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

MPI_Datatype particle_type()
{
    MPI_Datatype t, resized;
    int lens[3] = {3, 1, 1};
    MPI_Aint displs[3] = {offsetof(particle, pos), offsetof(particle, id),
                          offsetof(particle, tag)};
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
    MPI_Type_create_struct(3, lens, displs, types, &t);
    MPI_Type_create_resized(t, 0, sizeof(particle), &resized);
    MPI_Type_free(&t);
    MPI_Type_commit(&resized);
    return resized;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    // MPICH's C++ bindings (libmpichcxx)
    check(MPI::COMM_WORLD.Get_rank() == rank && MPI::COMM_WORLD.Get_size() == size,
          "C++ bindings: MPI::COMM_WORLD.Get_rank/Get_size agree with the C API");

    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    // point-to-point: a ring of small messages
    {
        std::vector<int> out(100), in(100, -1);
        std::iota(out.begin(), out.end(), rank * 1000);
        MPI_Sendrecv(out.data(), 100, MPI_INT, next, 1, in.data(), 100, MPI_INT, prev, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bool ok = true;
        for (int i = 0; i < 100; i++)
            ok = ok && in[i] == prev * 1000 + i;
        check(ok, "ring of 100 ints (MPI_Sendrecv)");
    }

    // point-to-point: a large message (rendezvous, striped over the rails)
    {
        const std::size_t n = 4u << 20; // doubles: 32 MiB
        std::vector<double> big(n);
        if (rank == 0) {
            for (std::size_t i = 0; i < n; i++)
                big[i] = static_cast<double>(i) * 0.5;
            MPI_Send(big.data(), static_cast<int>(n), MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Recv(big.data(), static_cast<int>(n), MPI_DOUBLE, 0, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; i++)
                bad += big[i] != static_cast<double>(i) * 0.5;
            check(bad == 0, "32 MiB message from rank 0 intact");
        }
    }

    // collectives
    {
        long mine = rank + 1, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        check(sum == static_cast<long>(size) * (size + 1) / 2, "MPI_Allreduce sum of ranks");
        std::vector<double> v(1000, rank == 0 ? 3.25 : 0.0);
        MPI_Bcast(v.data(), 1000, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        check(v[0] == 3.25 && v[999] == 3.25, "MPI_Bcast of 1000 doubles");
        std::vector<int> all(size, -1);
        MPI_Allgather(&rank, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
        bool ok = true;
        for (int i = 0; i < size; i++)
            ok = ok && all[i] == i;
        check(ok, "MPI_Allgather of ranks");
    }

    // derived datatypes: a struct and a strided vector
    {
        MPI_Datatype pt = particle_type();
        std::vector<particle> ps(500), pr(500);
        for (int i = 0; i < 500; i++) {
            ps[i] = particle{{rank + 0.1 * i, 1.0 * i, -1.0 * i}, rank * 10000 + i,
                             static_cast<char>('a' + i % 26)};
            std::memset(&pr[i], 0, sizeof(particle));
        }
        MPI_Sendrecv(ps.data(), 500, pt, next, 3, pr.data(), 500, pt, prev, 3, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        bool ok = true;
        for (int i = 0; i < 500; i++)
            ok = ok && pr[i].id == prev * 10000 + i && pr[i].pos[0] == prev + 0.1 * i &&
                 pr[i].pos[2] == -1.0 * i && pr[i].tag == static_cast<char>('a' + i % 26);
        check(ok, "500 structs (MPI_Type_create_struct, resized) around the ring");
        MPI_Type_free(&pt);

        // every other row of a 256x256 matrix (strided, 256 KiB of data)
        const int rows = 256, cols = 256;
        std::vector<double> m(rows * cols), r(rows * cols, 0.0);
        for (int i = 0; i < rows * cols; i++)
            m[i] = rank * 1e6 + i;
        MPI_Datatype row = contiguous_type<double>(cols), every_other;
        MPI_Type_vector(rows / 2, 1, 2, row, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Sendrecv(m.data(), 1, every_other, next, 4, r.data(), 1, every_other, prev, 4,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        std::size_t bad = 0;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                double want = (i % 2 == 0) ? prev * 1e6 + i * cols + j : 0.0;
                bad += r[i * cols + j] != want;
            }
        check(bad == 0, "every other row of a 256x256 matrix (MPI_Type_vector of rows)");
        MPI_Type_free(&every_other);
        MPI_Type_free(&row);
    }

    long total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf(total == 0 ? " No Errors\n" : " Found %ld errors\n", total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
