#pragma once

// Plans kept on disk (policy cache.dir), so that a later process serves a
// structure's first backward from a plan instead of compiling it. One file
// per structure, named by its portable key (compiler/portable_key.hpp),
// headed by gradd's and torch's versions; written to a temporary file and
// renamed over the old one, so a reader sees a whole file or none, and a
// killed writer leaves only a temporary behind.

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

/// Reads the plan stored under `key` in `dir`: nullopt if there is none, or
/// it is not a whole file of this gradd and torch version.
std::optional<stored_plan> load_plan(const std::string& dir, uint64_t key);

/// `dir` as an absolute path (against the working folder), for a reader
/// in another process; "" stays "".
std::string absolute_folder(const std::string& dir);

/// load_plan, when what it finds is a plan for node table `table`: the same
/// structure, compiled for the same order of sequence numbers.
std::optional<stored_plan> load_plan_for(const std::string& dir, uint64_t key,
                                         const compiler::graph& table);

} // namespace gradd::actors
