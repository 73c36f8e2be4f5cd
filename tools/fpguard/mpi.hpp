// The one seam between fpguard and MPI (docs/scale.md): the rank and size of an mpirun
// job, and an allgather of byte strings. Only the MPI module (mpi_module.cpp, built where
// CMake found MPI) sees MPI, and mpi.cpp loads it only in a process started by mpirun;
// without it the world is one process and allgather returns its own bytes. The library
// never sees MPI.
#pragma once

#include <string>
#include <vector>

namespace fpguard::cli::mpi {

struct World {
  int rank = 0, size = 1;
  // Every rank's default thread count, in rank order: the cores its CPU affinity allows,
  // divided among the ranks of its machine that may run on them (core_share in mpi.cpp).
  std::vector<int> cores;
  bool distributed() const { return size > 1; }
  bool root() const { return rank == 0; }
};

// Called first thing in main: MPI_Init when the build has MPI and the process was started
// by mpirun (OMPI_COMM_WORLD_SIZE or PMIX_RANK set), and this rank's share of the cores set
// as its default thread count (set_available_cores). A plain `fpguard` never loads MPI: a
// singleton MPI_Init costs about 0.35 s a process here, and OpenMPI may warn. Throws
// fpguard::Error when the build has MPI but its module cannot be loaded.
void start(int* argc, char*** argv);
// MPI_Finalize when started; returns `code`, the process's exit code.
int stop(int code);
const World& world();
// Collective: every rank calls it the same number of times, in the same order. Returns
// every rank's `bytes`, in rank order.
std::vector<std::string> allgather(const std::string& bytes);

}  // namespace fpguard::cli::mpi
