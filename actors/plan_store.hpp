#pragma once

// Plans kept on disk (policy cache.dir), so that a later process serves a
// structure's first backward from a plan instead of compiling it. One file
// per structure, named by its portable key (compiler/portable_key.hpp),
// headed by gradd's and torch's versions and a SHA-256 of the rest; written
// to a temporary file and renamed over the old one, so a reader sees a
// whole file or none, and a killed writer leaves only a temporary behind.
// A file is untrusted input: it is read only if it is a regular file (not
// a link) no larger than daemon.max_message_mb, its checksum holds, and its
// plan is exactly what its graph compiles to, for the structure at hand
// (compiler/foreign_plan.hpp).

#include "compiler/ir.hpp"
#include "compiler/plan.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace gradd::actors {

/// A compiled structure as stored: its node-level IR and its plan.
struct stored_plan {
  compiler::graph ir;
  compiler::plan plan;
};

/// Writes `stored` under `key` in folder `dir`. Returns an error message, or
/// "" on success; never throws.
std::string store_plan(const std::string& dir, uint64_t key, const stored_plan& stored);

/// What a load found.
struct plan_load {
  std::optional<stored_plan> plan;  ///< the plan, when it may serve
  std::string refused;  ///< why a file that was there does not serve ("" when none was there)
};

/// Reads the plan stored under `key` in `dir`, when it is a whole, intact
/// file of this gradd and torch version of at most `max_bytes`. Never throws.
plan_load load_plan(const std::string& dir, uint64_t key, size_t max_bytes);

/// load_plan, when what it finds may serve node table `table`
/// (compiler::check_foreign_plan): the same structure, compiled for the
/// same order of sequence numbers.
plan_load load_plan_for(const std::string& dir, uint64_t key, const compiler::graph& table,
                        size_t max_bytes);

/// The path of `key`'s file in `dir`.
std::string plan_file(const std::string& dir, uint64_t key);

/// `dir` as an absolute path (against the working folder), for a reader
/// in another process; "" stays "".
std::string absolute_folder(const std::string& dir);

} // namespace gradd::actors
