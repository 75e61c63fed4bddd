// Plans on disk (see plan_store.hpp). The body is the IR and plan in CAF's
// binary serialization (actors/ir_inspect.hpp, as the pipeline's messages).

#include "actors/plan_store.hpp"

#include "actors/actor_system.hpp"
#include "actors/ir_inspect.hpp"
#include "compiler/portable_key.hpp"

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <torch/version.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace gradd::actors {

namespace {

/// The first line of every file: what wrote it.
std::string header() {
  return std::string("gradd-plan 2 gradd ") + GRADD_VERSION + " torch " + TORCH_VERSION + "\n";
}

std::string file_of(const std::string& dir, uint64_t key) {
  char name[32];
  std::snprintf(name, sizeof name, "/%016llx.plan", static_cast<unsigned long long>(key));
  return dir + name;
}

} // namespace

std::string store_plan(const std::string& dir, uint64_t key, const stored_plan& stored) {
  std::vector<char> body;
  caf::binary_serializer sink{process_actor_system(), body};
  auto copy = stored;
  if (auto error = sink(copy.ir, copy.plan))
    return "cannot serialize the plan: " + process_actor_system().render(error);

  static std::atomic<uint64_t> writes{0};
  // POSIX calls, not std::filesystem: libtorch.so exports an older build of
  // std::filesystem that the dynamic linker binds gradd's calls to (its
  // remove_all crashed in a test).
  auto target = file_of(dir, key);
  auto temporary = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    auto head = header();
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    out.flush();
    if (!out) {
      ::unlink(temporary.c_str());
      return "cannot write " + temporary;
    }
  }
  // Atomic: readers see the old file or the new one.
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return "cannot rename " + temporary + " to " + target;
  }
  return {};
}

std::optional<stored_plan> load_plan(const std::string& dir, uint64_t key) {
  std::ifstream in(file_of(dir, key), std::ios::binary);
  if (!in)
    return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto head = header();
  if (bytes.compare(0, head.size(), head) != 0)
    return std::nullopt;  // another version, or not a plan of gradd's
  std::vector<char> body(bytes.begin() + static_cast<std::ptrdiff_t>(head.size()), bytes.end());
  stored_plan stored;
  try {
    caf::binary_deserializer source{process_actor_system(), body};
    if (source(stored.ir, stored.plan) || source.remaining() != 0)
      return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // sizes read from foreign bytes may not even allocate
  }
  return stored;
}

std::string absolute_folder(const std::string& dir) {
  if (dir.empty() || dir.front() == '/')
    return dir;
  // getcwd, not std::filesystem::absolute (see store_plan).
  std::vector<char> cwd(4096);
  if (::getcwd(cwd.data(), cwd.size()) == nullptr)
    return dir;
  return std::string(cwd.data()) + "/" + dir;
}

std::optional<stored_plan> load_plan_for(const std::string& dir, uint64_t key,
                                         const compiler::graph& table) {
  auto stored = load_plan(dir, key);
  if (stored && compiler::same_structure(stored->ir, table)
      && compiler::sequence_order_holds(stored->plan, table))
    return stored;
  return std::nullopt;
}

} // namespace gradd::actors
