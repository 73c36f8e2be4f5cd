// MPI behind mpi.hpp, through the MPI module (mpi_module.hpp), which this file loads in a
// process that mpirun started (src/lazy/library.hpp: open_module).
#include "mpi.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "fpguard/error.hpp"
#include "fpguard/limits.hpp"
#include "lazy/library.hpp"
#include "mpi_module.hpp"

namespace fpguard::cli::mpi {

namespace {

World the_world;
const ModuleApi* api = nullptr;  // while MPI is started

// mpirun (OpenMPI's, or any PMIx launcher such as srun --mpi=pmix) sets these.
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

#ifdef FPGUARD_WITH_MPI_MODULE
// The module, where fpguard's modules are (lazy::open_module). Loaded with its symbols
// global: Open MPI's own plugins resolve theirs against libmpi.
const ModuleApi* load_module() {
  constexpr const char* kFile = "libfpguard_mpi.so";
  void* handle = lazy::open_module(kFile, "MPI", RTLD_NOW | RTLD_GLOBAL);
  const auto get = reinterpret_cast<const ModuleApi* (*)()>(dlsym(handle, "fpguard_mpi_module"));
  const ModuleApi* m = get ? get() : nullptr;
  if (!m || m->version != kModuleVersion)
    throw Error(kFile, "not the MPI module of this fpguard (rebuild it)");
  return m;
}
#else
// A build without MPI: no module, and every process is a world of its own.
const ModuleApi* load_module() {
  return nullptr;
}
#endif

// This rank's share of the cores its CPU affinity allows: their number divided by the
// most ranks of this machine that may run on any one of them, at least 1. Bound to cores
// of its own (mpirun -n 2, --map-by ...:PE=N): all of them; unbound (oversubscribed) or
// bound to a socket it shares: an equal share, so that the ranks' threads together do not
// oversubscribe the cores. Collective.
int core_share() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const bool known = sched_getaffinity(0, sizeof(mine), &mine) == 0 && CPU_COUNT(&mine) > 0;
  std::vector<cpu_set_t> all(static_cast<std::size_t>(api->node_size()));
  api->node_allgather(&mine, sizeof(mine), all.data());
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

const World& world() {
  return the_world;
}

void start(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return;
  const ModuleApi* m = load_module();
  if (!m) return;
  m->init(argc, argv, &the_world.rank, &the_world.size);
  api = m;
  const int share = core_share();
  set_available_cores(share);
  the_world.cores.resize(static_cast<std::size_t>(the_world.size));
  api->allgather(&share, 1, false, the_world.cores.data());
}

int stop(int code) {
  if (api) api->finalize();
  api = nullptr;
  return code;
}

std::vector<std::string> allgather(const std::string& bytes) {
  if (!api) return {bytes};
  // Sizes first (64-bit: a state may pass 2 GiB), then the bytes in rounds small enough
  // that every rank's share of a round fits MPI's int counts and displacements.
  const auto n = static_cast<std::size_t>(the_world.size);
  const auto mine = static_cast<std::uint64_t>(bytes.size());
  std::vector<std::uint64_t> sizes(n);
  api->allgather(&mine, 1, true, sizes.data());
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
    api->allgatherv(bytes.data() + std::min<std::uint64_t>(at, mine), own, buffer.data(),
                    counts.data(), displs.data());
    for (std::size_t r = 0; r < n; ++r)
      out[r].replace(static_cast<std::size_t>(at), static_cast<std::size_t>(counts[r]), buffer,
                     static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(counts[r]));
  }
  return out;
}

}  // namespace fpguard::cli::mpi
