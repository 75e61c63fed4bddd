#pragma once

// Where a rank stands in its job, from the environment torchrun (or gradd
// launch, or a Slurm script) gives it: what agreement across ranks needs
// (Note [Agreement across ranks]).

#include <cstdint>
#include <functional>
#include <string>

namespace gradd::actors {

struct job_layout {
  std::string store;         ///< MASTER_ADDR:MASTER_PORT, "" outside a job
  uint32_t attempt = 0;      ///< $TORCHELASTIC_RESTART_COUNT
  uint32_t world_size = 1;   ///< $WORLD_SIZE
  uint32_t local_ranks = 1;  ///< $LOCAL_WORLD_SIZE, else every rank is on this machine
  uint32_t machine = 0;      ///< $GROUP_RANK, else RANK / LOCAL_WORLD_SIZE
  uint32_t machines = 1;     ///< $GROUP_WORLD_SIZE, else WORLD_SIZE / LOCAL_WORLD_SIZE rounded up

  /// A job of several ranks with a store to agree through.
  bool shared() const { return world_size > 1 && !store.empty(); }
};

/// Reads the layout through `getenv` (std::getenv by default). Values that
/// are not numbers, or contradict each other, read as a job of one rank.
job_layout read_job_layout(const std::function<const char*(const char*)>& getenv = std::getenv);

} // namespace gradd::actors
