// MPI behind mpi.hpp. Compiled with FPGUARD_WITH_MPI=1 only where CMake found MPI.
#include "mpi.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if FPGUARD_WITH_MPI
#include <mpi.h>
#include <sched.h>
#endif

#include "fpguard/limits.hpp"

namespace fpguard::cli::mpi {

namespace {
World the_world;
}  // namespace

const World& world() {
  return the_world;
}

#if FPGUARD_WITH_MPI

namespace {

bool started = false;

// mpirun (OpenMPI's, or any PMIx launcher such as srun --mpi=pmix) sets these.
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

// This rank's share of the cores its CPU affinity allows: their number divided by the
// most ranks of this machine that may run on any one of them, at least 1. Bound to cores
// of its own (mpirun -n 2, --map-by ...:PE=N): all of them; unbound (oversubscribed) or
// bound to a socket it shares: an equal share, so that the ranks' threads together do not
// oversubscribe the cores. Collective.
int core_share() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const bool known = sched_getaffinity(0, sizeof(mine), &mine) == 0 && CPU_COUNT(&mine) > 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks = 1;
  MPI_Comm_size(node, &ranks);
  std::vector<cpu_set_t> all(static_cast<std::size_t>(ranks));
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, node);
  MPI_Comm_free(&node);
  if (!known) return available_cores();
  int most = 1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mine)) continue;
    int users = 0;
    for (const auto& s : all) users += CPU_ISSET(c, &s) ? 1 : 0;
    most = std::max(most, users);
  }
  return std::max(1, CPU_COUNT(&mine) / most);
}

}  // namespace

void start(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return;
  MPI_Init(argc, argv);
  started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &the_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &the_world.size);
  const int share = core_share();
  set_available_cores(share);
  the_world.cores.resize(static_cast<std::size_t>(the_world.size));
  MPI_Allgather(&share, 1, MPI_INT, the_world.cores.data(), 1, MPI_INT, MPI_COMM_WORLD);
}

int stop(int code) {
  if (started) MPI_Finalize();
  started = false;
  return code;
}

std::vector<std::string> allgather(const std::string& bytes) {
  if (!started) return {bytes};
  // Sizes first (64-bit: a state may pass 2 GiB), then the bytes in rounds small enough
  // that every rank's share of a round fits MPI's int counts and displacements.
  const auto n = static_cast<std::size_t>(the_world.size);
  const auto mine = static_cast<std::uint64_t>(bytes.size());
  std::vector<std::uint64_t> sizes(n);
  MPI_Allgather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<std::string> out(n);
  for (std::size_t r = 0; r < n; ++r) out[r].resize(sizes[r]);
  const std::uint64_t chunk = std::max<std::uint64_t>(1, INT32_MAX / n);
  std::uint64_t largest = 0;
  for (const auto s : sizes) largest = std::max(largest, s);
  std::vector<int> counts(n), displs(n);
  std::string buffer;
  for (std::uint64_t at = 0; at < largest; at += chunk) {
    std::size_t total = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint64_t left = sizes[r] > at ? sizes[r] - at : 0;
      counts[r] = static_cast<int>(std::min(left, chunk));
      displs[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    buffer.resize(total);
    const int own = counts[static_cast<std::size_t>(the_world.rank)];
    MPI_Allgatherv(bytes.data() + std::min<std::uint64_t>(at, mine), own, MPI_BYTE, buffer.data(),
                   counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    for (std::size_t r = 0; r < n; ++r)
      out[r].replace(static_cast<std::size_t>(at), static_cast<std::size_t>(counts[r]), buffer,
                     static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r]));
  }
  return out;
}

#else

void start(int*, char***) {}
int stop(int code) {
  return code;
}
std::vector<std::string> allgather(const std::string& bytes) {
  return {bytes};
}

#endif

}  // namespace fpguard::cli::mpi
