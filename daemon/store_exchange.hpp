#pragma once

// Agreement across machines (Note [Agreement across ranks]): each
// machine's daemon settles its own ranks' proposals, then the machines meet
// in the job's own rendezvous store, PyTorch's c10d TCPStore at
// MASTER_ADDR:MASTER_PORT, rather than in a protocol of gradd's: every
// daemon writes its machine's largest proposal under its machine's key,
// waits for every machine's and takes the largest, so all compute the same.

#include <chrono>
#include <cstdint>
#include <string>

namespace gradd::daemon {

/// One machine's part in one agreement.
struct store_round {
  std::string store;   ///< host:port of the job's TCPStore
  std::string prefix;  ///< the round's keys: prefix + machine index
  uint32_t machine = 0;
  uint32_t machines = 1;
  uint64_t largest_here = 0;  ///< this machine's ranks' largest proposal
  std::chrono::milliseconds timeout{0};
};

/// The store keys' prefix of round `round` of structure `key`'s agreement
/// in attempt `attempt` of a job.
std::string store_prefix(uint32_t attempt, uint64_t key, uint64_t round);

/// The largest proposal of all machines. Blocks until every machine wrote
/// its own; throws std::exception naming what failed when the store cannot
/// be reached or a machine does not write within the round's timeout.
uint64_t exchange_through_store(const store_round& round);

} // namespace gradd::daemon
